// The S3 server test_s3_store runs: s3rver (a real S3-compatible server
// keeping objects in a folder) with every request's SigV4 signature checked
// first by AWS's own signer (@smithy/signature-v4), which s3rver leaves
// unchecked (it checks only the access key id). A request signed wrongly
// gets S3's 403 SignatureDoesNotMatch, as from AWS.
//   node --openssl-legacy-provider server.mjs --dir DIR --port PORT [--bucket NAME]...
// (s3rver makes ListObjectsV2's continuation tokens with DES, which Node's
// OpenSSL 3 offers only from its legacy provider: without the flag a
// truncated listing answers 500.)
// Listens on 127.0.0.1 only; prints {"port": N} once it accepts requests.
// The account is s3rver's built-in one: S3RVER / S3RVER; $S3_SECRET, when
// set, is the secret this server takes for S3RVER instead (a test's way to
// make a running client's credentials wrong).
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(import.meta.url);
const S3rver = require('s3rver');
const { SignatureV4 } = require('@smithy/signature-v4');
const { Hash } = require('@smithy/hash-node');

const KEYS = { S3RVER: process.env.S3_SECRET || 'S3RVER' };
const SKEW_MS = 15 * 60 * 1000; // AWS's bound on a request's clock

const { values } = parseArgs({
  options: {
    dir: { type: 'string' },
    port: { type: 'string', default: '0' },
    bucket: { type: 'string', multiple: true, default: [] },
  },
});

const AUTH = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([a-z0-9-]+)\/s3\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/;

function refuse(ctx, code, message) {
  ctx.status = 403;
  ctx.type = 'application/xml';
  ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`;
}

async function checkSigV4(ctx, next) {
  const m = AUTH.exec(ctx.get('authorization'));
  if (!m) return refuse(ctx, 'AccessDenied', 'a SigV4 Authorization header is required');
  const [, keyId, day, region, signedList, signature] = m;
  const secret = KEYS[keyId];
  if (!secret) return refuse(ctx, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.');
  const amzDate = ctx.get('x-amz-date');
  const dm = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!dm || amzDate.slice(0, 8) !== day) return refuse(ctx, 'AccessDenied', 'x-amz-date missing or not the credential\'s day');
  const when = new Date(Date.UTC(+dm[1], dm[2] - 1, +dm[3], +dm[4], +dm[5], +dm[6]));
  if (Math.abs(Date.now() - when.getTime()) > SKEW_MS) return refuse(ctx, 'RequestTimeTooSkewed', 'The difference between the request time and the current time is too large.');

  const signed = signedList.split(';');
  const headers = {};
  for (const h of signed) {
    if (ctx.req.headers[h] === undefined) return refuse(ctx, 'AccessDenied', `signed header ${h} not sent`);
    headers[h] = ctx.req.headers[h];
  }
  // The path as sent (S3 signs it encoded once); the query decoded, for the
  // signer to encode and sort as SigV4 says.
  const raw = ctx.req.url;
  const qi = raw.indexOf('?');
  const path = qi < 0 ? raw : raw.slice(0, qi);
  const query = {};
  if (qi >= 0) {
    for (const pair of raw.slice(qi + 1).split('&')) {
      if (!pair) continue;
      const ei = pair.indexOf('=');
      const k = decodeURIComponent(ei < 0 ? pair : pair.slice(0, ei));
      const v = ei < 0 ? '' : decodeURIComponent(pair.slice(ei + 1));
      query[k] = k in query ? [].concat(query[k], v) : v;
    }
  }
  const signer = new SignatureV4({
    service: 's3', region, credentials: { accessKeyId: keyId, secretAccessKey: secret },
    sha256: Hash.bind(null, 'sha256'), uriEscapePath: false, applyChecksum: false,
  });
  const out = await signer.sign(
    { method: ctx.method, protocol: 'http:', hostname: ctx.hostname, path, query, headers },
    { signingDate: when, signableHeaders: new Set(signed) });
  const want = /Signature=([0-9a-f]{64})/.exec(out.headers.authorization)[1];
  if (want !== signature) return refuse(ctx, 'SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided. Check your key and signing method.');
  return next();
}

const server = new S3rver({
  address: '127.0.0.1',
  port: Number(values.port),
  directory: values.dir,
  silent: true,
  vhostBuckets: false,
  configureBuckets: values.bucket.map(name => ({ name })),
});
// Before s3rver's own middleware: Koa composes the list at listen.
server.middleware.unshift(checkSigV4);
const addr = await server.run();
process.stdout.write(JSON.stringify({ port: addr.port }) + '\n');
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
