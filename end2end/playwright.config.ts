import { defineConfig, devices } from "@playwright/test";

// Playwright starts Idem (built by `make build`, at LEPTOS_SITE_ADDR) before
// the suite and stops it afterwards; `make e2e` points it at a fresh demo
// database through the environment, which the server inherits.
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
  webServer: [
    // A real OpenID provider (oidc-provider from npm) for the sign-in tests.
    {
      command: "node oidc-provider.mjs",
      url: `http://${provider}/.well-known/openid-configuration`,
      env: { OIDC_PROVIDER_ADDR: provider, LEPTOS_SITE_ADDR: address },
      reuseExistingServer: false,
      stdout: "ignore",
      stderr: "pipe",
      timeout: 30_000,
    },
    // Idem itself, from the workspace root (where target/site is). Ready
    // once migrated; global-setup.ts then waits for the demo's history.
    {
      command: process.env.IDEM_BIN ?? "target/debug/idem",
      cwd: "..",
      url: `http://${address}/readyz`,
      reuseExistingServer: false,
      stdout: "pipe",
      stderr: "pipe",
      timeout: 120_000,
      gracefulShutdown: { signal: "SIGTERM", timeout: 15_000 },
    },
  ],
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
