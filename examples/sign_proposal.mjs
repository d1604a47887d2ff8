#!/usr/bin/env node
// Signs a proposal record as intentledger expects, with nothing but Node's own crypto: a
// compact JWS with a detached payload (RFC 7515 appendix F) over the record's exact bytes, for
// the `intentledger-signature` Kafka header (docs/identity.md).
//
//   node examples/sign_proposal.mjs KEY.jwk PRINCIPAL TENANT < record.json
//
// prints the header value. KEY.jwk is the principal's private JWK (`intentledger keys
// generate`), Ed25519 or P-256. Sign the bytes you send: the signature covers them exactly,
// so re-serializing the JSON after signing makes it fail as `signature_invalid`.
import { createPrivateKey, sign } from "node:crypto";
import { readFileSync } from "node:fs";

const [keyFile, principal, tenant] = process.argv.slice(2);
if (!tenant) {
  console.error("usage: sign_proposal.mjs KEY.jwk PRINCIPAL TENANT < record.json");
  process.exit(2);
}
const jwk = JSON.parse(readFileSync(keyFile, "utf8"));
const value = readFileSync(0); // the record's value, as bytes
const now = Math.floor(Date.now() / 1000);
const header = {
  alg: jwk.kty === "OKP" ? "Ed25519" : "ES256", kid: jwk.kid, typ: "intentledger-proposal+jws",
  principal, tenant, iat: now, exp: now + 120, // at most 300 s
};
const b64url = (bytes) => Buffer.from(bytes).toString("base64url");
const protectedPart = b64url(JSON.stringify(header));
const input = Buffer.from(`${protectedPart}.${b64url(value)}`);
const key = createPrivateKey({ key: jwk, format: "jwk" });
// Ed25519 takes no digest; ES256 is SHA-256 with the raw r||s form JWS uses (RFC 7518 §3.4).
const signature = jwk.kty === "OKP" ? sign(null, input, key)
  : sign("sha256", input, { key, dsaEncoding: "ieee-p1363" });
process.stdout.write(`${protectedPart}..${b64url(signature)}\n`);
