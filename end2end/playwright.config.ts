import { defineConfig, devices } from "@playwright/test";

// cargo-leptos starts the server (at LEPTOS_SITE_ADDR) before running this
// suite and stops it afterwards; `make test` points it at a fresh demo database.
const address = process.env.LEPTOS_SITE_ADDR ?? "127.0.0.1:3000";
// The OpenID provider Idem signs in through (IDEM_OIDC_ISSUER in the Makefile).
const provider = process.env.OIDC_PROVIDER_ADDR ?? "127.0.0.1:3951";

export default defineConfig({
  // `make screenshots` runs the README's screenshots instead of the tests.
  testDir: process.env.IDEM_SCREENSHOTS ? "./screenshots" : "./tests",
  globalSetup: "./global-setup.ts",
  timeout: 60_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  workers: 1,
  forbidOnly: true,
  retries: 0,
  reporter: [["list"]],
  // A real OpenID provider (oidc-provider from npm) for the sign-in tests.
  webServer: {
    command: "node oidc-provider.mjs",
    url: `http://${provider}/.well-known/openid-configuration`,
    env: { OIDC_PROVIDER_ADDR: provider, LEPTOS_SITE_ADDR: address },
    reuseExistingServer: false,
    stdout: "ignore",
    stderr: "pipe",
    timeout: 30_000,
  },
  use: {
    baseURL: `http://${address}`,
    trace: "retain-on-failure",
  },
  projects: [
    {
      name: "chromium",
      use: {
        ...devices["Desktop Chrome"],
        // Debian's Chromium; Playwright never downloads a browser here.
        launchOptions: {
          executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
          args: [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
          ],
        },
      },
    },
  ],
});
