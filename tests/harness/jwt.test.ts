/** HS256 JWTs on WebCrypto: what is accepted and what is refused, and why. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { TokenRejectedError } from "../../harness/mod.ts";
import { HmacJwt } from "../../http/token-endpoint/jwt.ts";

const SECRET = "0123456789abcdef0123456789abcdef";
const NOW = Date.UTC(2026, 0, 1);
const seconds = NOW / 1000;

function b64url(text: string): string {
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function rejected(promise: Promise<unknown>): Promise<string> {
  const error = await promise.catch((e) => e);
  assert.ok(error instanceof TokenRejectedError, String(error));
  return error.reason;
}

describe("HmacJwt", { timeout: 10_000 }, () => {
  it("signs and verifies claims", async () => {
    const jwt = await HmacJwt.create(SECRET);
    const token = await jwt.sign({ sub: "exec_m_1", iss: "me", iat: seconds, exp: seconds + 300 });
    const claims = await jwt.verify(token, { now: NOW, issuer: "me" });
    assert.equal(claims.sub, "exec_m_1");
    assert.deepEqual(JSON.parse(atob(token.split(".")[0])), { alg: "HS256", typ: "JWT" });
  });

  it("refuses a token signed with another secret, or with its payload changed", async () => {
    const jwt = await HmacJwt.create(SECRET);
    const other = await HmacJwt.create(
      new TextEncoder().encode("another-secret-of-32-bytes-long!!"),
    );
    const token = await other.sign({ exp: seconds + 300 });
    assert.equal(await rejected(jwt.verify(token, { now: NOW })), "signature");
    const good = await jwt.sign({ exp: seconds + 300, mid: "m_1" });
    const [header, , signature] = good.split(".");
    const changed = `${header}.${
      b64url(JSON.stringify({ exp: seconds + 300, mid: "m_2" }))
    }.${signature}`;
    assert.equal(await rejected(jwt.verify(changed, { now: NOW })), "signature");
  });

  it("refuses alg none and any algorithm but HS256", async () => {
    const jwt = await HmacJwt.create(SECRET);
    const payload = b64url(JSON.stringify({ exp: seconds + 300 }));
    for (const alg of ["none", "HS512", "RS256"]) {
      const token = `${b64url(JSON.stringify({ alg, typ: "JWT" }))}.${payload}.`;
      assert.equal(await rejected(jwt.verify(token, { now: NOW })), "algorithm");
    }
  });

  it("refuses expired, not-yet-valid, exp-less and wrong-issuer tokens", async () => {
    const jwt = await HmacJwt.create(SECRET);
    const expired = await jwt.sign({ exp: seconds });
    assert.equal(await rejected(jwt.verify(expired, { now: NOW })), "expired");
    assert.ok(await jwt.verify(expired, { now: NOW, leewaySeconds: 5 }), "within the leeway");
    const early = await jwt.sign({ exp: seconds + 300, nbf: seconds + 60 });
    assert.equal(await rejected(jwt.verify(early, { now: NOW })), "claims");
    const forever = await jwt.sign({ sub: "x" });
    assert.equal(await rejected(jwt.verify(forever, { now: NOW })), "claims");
    const foreign = await jwt.sign({ exp: seconds + 300, iss: "other" });
    assert.equal(await rejected(jwt.verify(foreign, { now: NOW, issuer: "me" })), "issuer");
  });

  it("refuses malformed tokens without echoing them", async () => {
    const jwt = await HmacJwt.create(SECRET);
    for (const token of ["", "a.b", "a.b.c.d", "!!.??.**", `${b64url("[1]")}.e30.`]) {
      const error = await jwt.verify(token, { now: NOW }).catch((e) => e);
      assert.ok(error instanceof TokenRejectedError, String(error));
      if (token) {
        assert.equal(error.message.includes(token), false, "the token is not in the message");
      }
    }
  });

  it("needs a secret of at least 32 bytes", async () => {
    await assert.rejects(HmacJwt.create("short"), RangeError);
  });
});
