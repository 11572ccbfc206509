#!/usr/bin/env python3
"""Sends N GET requests in turn over one keep-alive connection, rotating
over the paths in a file, as a browser does (Cookie, Accept-Encoding); fails
on any answer that is not 200. Used by scripts/profile-key-page.sh, where a
fixed count of requests matters more than a rate.

    drive.py HOST:PORT PATHS_FILE N [COOKIE] [ACCEPT_ENCODING]
"""
import http.client
import sys


def main():
    address, paths_file, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cookie = sys.argv[4] if len(sys.argv) > 4 else ""
    accept = sys.argv[5] if len(sys.argv) > 5 else ""
    host, port = address.rsplit(":", 1)
    paths = [line.rstrip("\n") for line in open(paths_file) if line.strip()]
    headers = {"Accept": "text/html"}
    if cookie:
        headers["Cookie"] = cookie
    if accept:
        headers["Accept-Encoding"] = accept
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    sent = 0
    for i in range(count):
        connection.request("GET", paths[i % len(paths)], headers=headers)
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            sys.exit(f"drive.py: {paths[i % len(paths)]} answered {response.status}: {body[:200]!r}")
        sent += len(body)
    print(f"{count} requests, {sent} bytes of bodies", file=sys.stderr)


if __name__ == "__main__":
    main()
