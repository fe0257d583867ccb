/**
 * Print a one-time sign-in link to the developer console.
 * `npm run console:link -- --account <id>` (default: the development account of
 * scripts/bootstrap.ts). The link works once, for CONSOLE_LINK_TTL_MINUTES minutes; only its
 * hash is stored. Whoever opens it is signed in as that account: hand it over privately.
 */
import { parseArgs } from 'node:util';
import { createSignInLinks } from '../platform/console/sessions.repository';
import { loadConfig } from '../platform/infra/config';
import { connectMongo, ensureIndexes, storeOf } from '../platform/infra/mongo';

const { values } = parseArgs({ options: { account: { type: 'string', default: 'acct_development' } } });
const config = loadConfig();
const db = await connectMongo(config.MONGODB_URL);
try {
  await ensureIndexes(db);
  const accountId = values.account!;
  if (!(await db.accounts.findOne({ _id: accountId }, { projection: { _id: 1 } }))) {
    console.error(
      `[console:link] no account ${accountId} (start the service once with npm start to create the development account)`,
    );
    process.exitCode = 1;
  } else {
    const { url, expiresAt } = await createSignInLinks(storeOf(db), config).forAccount(accountId).issue();
    console.log(
      `\n  Developer console sign-in link for ${accountId} (works once, until ${expiresAt.toISOString()}):\n\n    ${url}\n`,
    );
  }
} finally {
  await db.close();
}
