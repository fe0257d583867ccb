/**
 * First start: create the development account (Pro plan, DEV_ACCOUNT_CREDITS credits) and print
 * a working API key once. Later starts find the account and print nothing secret.
 * `tsx scripts/bootstrap.ts --new-key` prints another key for the development account.
 */
import { SCOPES } from '../contracts/registry';
import { createAccountsRepository } from '../platform/accounts';
import { loadConfig } from '../platform/config';
import { connectMongo, ensureIndexes } from '../platform/mongo';

const DEV_ACCOUNT_ID = 'acct_development';

const config = loadConfig();
const db = await connectMongo(config.MONGODB_URL);
try {
  await ensureIndexes(db);
  const accounts = createAccountsRepository(db);
  let account = await accounts.getAccount(DEV_ACCOUNT_ID);
  const newKey = process.argv.includes('--new-key');
  if (!account) {
    account = await accounts.createAccount({ id: DEV_ACCOUNT_ID, name: 'Development', plan: 'pro', credits: config.DEV_ACCOUNT_CREDITS });
  } else if (!newKey) {
    console.log(`[bootstrap] development account ${DEV_ACCOUNT_ID} exists (key printed at first start; npm run key for a new one)`);
    process.exit(0);
  }
  const { key } = await accounts.createKey(account._id, { name: 'development', scopes: [...SCOPES] });
  console.log(
    [
      '',
      '  Development account ready (plan pro, ' + account.credits + ' credits).',
      '  API key (shown once, stored only as a hash):',
      '',
      '    ' + key,
      '',
      `  Try: curl -H "Authorization: Bearer ${key}" ${config.PUBLIC_BASE_URL}/api/v1/account`,
      '',
    ].join('\n'),
  );
} finally {
  await db.close();
}
