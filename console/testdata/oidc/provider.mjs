// The OpenID provider the console's sign-in tests sign people in
// through: oidc-provider with one confidential client (the console, its
// redirect and post-logout URLs from the environment), PKCE required,
// and two people whose ID tokens carry a groups claim:
//   ada   groups ["managers"]
//   grace groups ["support"]
// Any password is accepted (the provider's development login page).
//
// It prints one JSON line, {"issuer": "..."}, once it listens.
//
// POST /test/tamper, with a JSON body {"claims": {...}, "foreignKey": bool},
// makes the next token response's ID token carry those claims (re-signed
// with the provider's key, or with a key it does not publish): how the
// tests hand the console an ID token for another issuer or audience, or
// with another nonce.
import http from 'node:http';
import Provider from 'oidc-provider';
import { generateKeyPair, exportJWK, decodeJwt, SignJWT } from 'jose';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`$${name} is required`);
  return v;
};
const groups = { ada: ['managers'], grace: ['support'] };

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
const foreign = (await generateKeyPair('RS256')).privateKey;

let tamper = null;

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://localhost:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: env('OIDC_CLIENT_ID'),
    client_secret: env('OIDC_CLIENT_SECRET'),
    redirect_uris: [env('OIDC_REDIRECT_URI')],
    post_logout_redirect_uris: [env('OIDC_POST_LOGOUT_URI')],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  jwks: { keys: [jwk] },
  cookies: { keys: ['markov-console-oidc-test-cookie-key'] },
  claims: { openid: ['sub'], groups: ['groups'] },
  scopes: ['openid', 'groups'],
  // The groups claim goes in the ID token, not only the userinfo.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  async findAccount(ctx, id) {
    return { accountId: id, async claims() { return { sub: id, groups: groups[id] ?? [] }; } };
  },
});

provider.use(async (ctx, next) => {
  if (ctx.method === 'POST' && ctx.path === '/test/tamper') {
    let body = '';
    for await (const chunk of ctx.req) body += chunk;
    tamper = JSON.parse(body);
    ctx.status = 204;
    return;
  }
  await next();
  if (ctx.path === '/token' && tamper && ctx.body?.id_token) {
    const { claims, foreignKey } = tamper;
    tamper = null;
    const payload = { ...decodeJwt(ctx.body.id_token), ...claims };
    ctx.body = {
      ...ctx.body,
      id_token: await new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).sign(foreignKey ? foreign : privateKey),
    };
  }
});

server.on('request', provider.callback());
process.stdout.write(JSON.stringify({ issuer }) + '\n');
