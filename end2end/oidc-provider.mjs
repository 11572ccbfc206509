// A real OpenID provider for the browser tests: `oidc-provider` (a certified
// implementation, from the npm registry) on 127.0.0.1, with its built-in
// login and consent pages. Playwright starts it (playwright.config.ts) and
// Idem, started by cargo-leptos with IDEM_OIDC_* (Makefile, e2e), signs in
// through it.
//
// The login page takes any password; the login name picks one of the
// accounts below. POST /test/groups {"account": "...", "groups": [...]}
// changes someone's groups, as an administrator would in the directory.
//
// Usage: node oidc-provider.mjs   (OIDC_PROVIDER_ADDR, LEPTOS_SITE_ADDR)
import Provider from "oidc-provider";

const providerAddr = process.env.OIDC_PROVIDER_ADDR ?? "127.0.0.1:3951";
const idemAddr = process.env.LEPTOS_SITE_ADDR ?? "127.0.0.1:3000";
const [host, port] = providerAddr.split(":");

const accounts = new Map([
  ["oncall", { email: "oncall@example.com", groups: ["sre"] }],
  ["auditor", { email: "auditor@example.com", groups: ["finance"] }],
]);

const configuration = {
  clients: [
    {
      client_id: "idem",
      client_secret: "idem-e2e-secret",
      redirect_uris: [`http://${idemAddr}/auth/oidc/callback`],
      post_logout_redirect_uris: [`http://${idemAddr}/login`],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  // Idem always sends a PKCE challenge; this provider insists on it.
  pkce: { required: () => true },
  scopes: ["openid", "email", "profile", "groups"],
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["name"],
    groups: ["groups"],
  },
  // Put the scopes' claims (groups among them) in the ID token, as Okta,
  // Entra ID and Keycloak can be configured to.
  conformIdTokenClaims: false,
  async findAccount(_ctx, id) {
    const account = accounts.get(id);
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          email: account.email,
          email_verified: true,
          name: id,
          groups: account.groups,
        };
      },
    };
  },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  cookies: { keys: ["idem-end2end-only"] },
};

const provider = new Provider(`http://${providerAddr}`, configuration);

// The directory's administrator, for tests.
provider.use(async (ctx, next) => {
  if (ctx.path === "/test/groups" && ctx.method === "POST") {
    let body = "";
    for await (const chunk of ctx.req) body += chunk;
    const { account, groups } = JSON.parse(body);
    if (!accounts.has(account)) ctx.throw(404, "no such account");
    accounts.get(account).groups = groups;
    ctx.body = { account, groups };
    return;
  }
  await next();
});

provider.listen(Number(port), host, () => {
  console.log(`oidc-provider at http://${providerAddr}, for Idem at http://${idemAddr}`);
});
