// Campaigns attacked as a hostile repository, a hostile model, a hostile forge and a hostile
// campaign file would: where a forge token may go, what the model's text may do in a pull request,
// a commit or a terminal, which branch names a campaign may push. Pure where it can be; else
// against local servers (a redirecting API, a catcher on another origin). No Docker, no Redis.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { forgeOf, type PublishContext } from "../src/campaign/campaign-context.js";
import { GitHubForge } from "../src/campaign/forge-github.js";
import { GitLabForge } from "../src/campaign/forge-gitlab.js";

const GH = "ghp_attackTOKEN0123456789abcdefABCDEF";
const GL = "glpat-attackTOKEN0123456789abc";

describe("a forge token goes to its own host, over the forge's own scheme, and nowhere else", () => {
  const config = loadConfig({ GITHUB_TOKEN: GH, GITLAB_TOKEN: GL, PATCHBAY_FORGES: "127.0.0.1:9999=github@http://127.0.0.1:9999", PATCHBAY_FORGE_TOKEN_127_0_0_1_9999: "local-token-0123456789" });
  const ctx = { config, forges: new Map() } as unknown as PublishContext;

  it("gives no token to git for a URL in the clear (http://github.com), nor one whose host git reads otherwise than the URL parser", () => {
    for (const url of ["http://github.com/acme/api.git", "http://gitlab.com/acme/api.git", "https://gitlab.com\\.evil.example/acme/api", "https://github%2Ecom/acme/api", "https://gitlab.com:8443/acme/api"]) {
      expect(forgeOf(ctx, url).credential, url).toBeUndefined();
    }
  });

  it("still gives it where it belongs: https on the forge's host (any case, the default port), http where the forge's own API is http", () => {
    for (const url of ["https://github.com/acme/api.git", "https://GitHub.com/acme/api", "https://github.com:443/acme/api", "https://gitlab.com/acme/sub/api.git"]) {
      expect(forgeOf(ctx, url).credential?.password, url).toBe(url.includes("gitlab") ? GL : GH);
    }
    expect(forgeOf(ctx, "http://127.0.0.1:9999/acme/api.git").credential?.password).toBe("local-token-0123456789");
    expect(forgeOf(ctx, "git@github.com:acme/api.git").credential).toBeUndefined(); // ssh: the user's keys
  });
});

describe("a forge's API that redirects elsewhere gets no token there", () => {
  let catcher: http.Server, redirector: http.Server;
  const caught: http.IncomingHttpHeaders[] = [];
  let apiUrl = "";
  const listen = async (s: http.Server) => (await new Promise<void>((r) => s.listen(0, "127.0.0.1", r)), (s.address() as AddressInfo).port);

  beforeAll(async () => {
    catcher = http.createServer((req, res) => (caught.push(req.headers), res.writeHead(200, { "content-type": "application/json" }), res.end("[]")));
    const other = await listen(catcher);
    // Another origin (localhost, not 127.0.0.1): what an open redirect on a forge would send to.
    redirector = http.createServer((req, res) => (res.writeHead(302, { location: `http://localhost:${other}${req.url}` }), res.end()));
    apiUrl = `http://127.0.0.1:${await listen(redirector)}`;
  });
  afterAll(() => (catcher.close(), redirector.close()));

  it.each([
    ["GitHub", () => new GitHubForge({ host: "gh.test", kind: "github", apiUrl }, GH), GH],
    ["GitLab", () => new GitLabForge({ host: "gl.test", kind: "gitlab", apiUrl }, GL), GL],
  ] as const)("%s: the token is in no header the other origin sees", async (_name, make, token) => {
    caught.length = 0;
    await make().findOpen({ host: "x", path: "acme/api" }, "patchbay/c", "main").catch(() => undefined);
    expect(JSON.stringify(caught)).not.toContain(token);
  });
});
