/**
 * First start: create the development account (Pro plan, DEV_ACCOUNT_CREDITS credits) and print
 * a working API key once. Later starts find the account and print nothing secret.
 * `tsx scripts/bootstrap.ts --new-key` prints another key for the development account.
 *
 * Drive development data (created when missing, on every start, so older development databases
 * get it too):
 * - a folder "Shared" at the root of the development drive, and a second key pinned to it
 *   (`folderPins: [<Shared id>]`, scopes drive:read and drive:write): it sees and changes only
 *   "Shared" and what is inside it. Printed once, when it is made.
 * - a demo team "Demo team" (`team_development`, owned by the development account, which is its
 *   owner member) whose team drive holds a folder "Team handbook" with welcome.md: browse it with
 *   GET /drive/files?teamId=team_development (read-only over the API).
 * - two agents (platform/agents/seed.ts): agt_research (start_research, create_notes,
 *   list_projects) and agt_outreach (list_projects, create_notes, send_email; send_email needs
 *   the owner's approval).
 */
import { SCOPES } from '../contracts/registry';
import { createAccountsRepository } from '../platform/accounts/accounts.repository';
import { loadConfig } from '../platform/infra/config';
import { fromUnits, migrateCreditUnits } from '../platform/credits/credits';
import { putDriveBlob } from '../platform/drive/blobs.repository';
import { nameKeyOf } from '../platform/drive/drive.repository';
import type { DriveFileDoc, DriveFolderDoc, DriveUsageDoc, TeamDoc } from '../platform/drive/drive.types';
import { createTeams } from '../platform/drive/teams.repository';
import { newId } from '../platform/infra/ids';
import { seedDevAgents } from '../platform/agents/seed';
import { COLLECTIONS, connectMongo, ensureIndexes, storeOf, type Database } from '../platform/infra/mongo';

const DEV_ACCOUNT_ID = 'acct_development';
const DEV_TEAM_ID = 'team_development';

/** A root folder of a drive by name, made when missing. */
async function ensureFolder(
  db: Database,
  owner: { accountId: string; teamId: string | null },
  name: string,
): Promise<DriveFolderDoc> {
  const folders = db.db.collection<DriveFolderDoc>(COLLECTIONS.driveFolders);
  const found = await folders.findOne({
    accountId: owner.accountId,
    teamId: owner.teamId,
    parentFolderId: null,
    nameKey: nameKeyOf(name),
  });
  if (found) return found;
  const now = new Date();
  const doc: DriveFolderDoc = {
    _id: newId('dfo'),
    ...owner,
    name,
    nameKey: nameKeyOf(name),
    parentFolderId: null,
    path: [],
    color: null,
    sticker: null,
    version: 1,
    createdAt: now,
    updatedAt: now,
  };
  await folders.insertOne(doc);
  return doc;
}

/** The Drive development data above; returns the pinned key when it was made now. */
async function ensureDriveDemo(
  db: Database,
  accounts: ReturnType<typeof createAccountsRepository>,
  accountId: string,
): Promise<string | null> {
  const shared = await ensureFolder(db, { accountId, teamId: null }, 'Shared');
  let pinnedKey: string | null = null;
  if (!(await db.apiKeys.findOne({ accountId, folderPins: shared._id, revokedAt: null }))) {
    pinnedKey = (
      await accounts.forAccount(accountId).createKey({
        name: 'development (Drive: Shared only)',
        scopes: ['drive:read', 'drive:write'],
        folderPins: [shared._id],
      })
    ).key;
  }

  const teams = createTeams(storeOf(db));
  if (!(await db.db.collection<TeamDoc>(COLLECTIONS.teams).findOne({ _id: DEV_TEAM_ID }))) {
    await teams.createTeam({ id: DEV_TEAM_ID, name: 'Demo team', ownerAccountId: accountId });
  }
  const owner = { accountId, teamId: DEV_TEAM_ID };
  const handbook = await ensureFolder(db, owner, 'Team handbook');
  const files = db.db.collection<DriveFileDoc>(COLLECTIONS.driveFiles);
  if (!(await files.findOne({ ...owner, folderId: handbook._id, nameKey: 'welcome.md' }))) {
    const id = newId('dfl');
    const bytes = Buffer.from(
      '# Welcome to the demo team\n\nThis team drive is read-only over the API: browse it with `GET /drive/files?teamId=team_development`.\n',
      'utf8',
    );
    const blob = await putDriveBlob(storeOf(db), bytes, {
      accountId,
      contentType: 'text/markdown',
      filename: 'welcome.md',
      fileId: id,
    });
    const now = new Date();
    await files.insertOne({
      _id: id,
      ...owner,
      name: 'welcome.md',
      nameKey: 'welcome.md',
      ext: 'md',
      kind: 'text',
      mimeType: 'text/markdown',
      sizeBytes: bytes.length,
      folderId: handbook._id,
      isStarred: false,
      tags: ['demo'],
      description: 'Demo team-drive file',
      blobId: blob.blobId,
      sha256: blob.sha256,
      trashedAt: null,
      lastAccessedAt: null,
      // pending: the scheduler's text sweep asks the drive pool for it.
      text: { status: 'pending', chars: 0, truncated: false, engine: null, error: null, at: null },
      version: 1,
      createdAt: now,
      updatedAt: now,
    });
    await db.db
      .collection<DriveUsageDoc>(COLLECTIONS.driveUsage)
      .updateOne({ _id: `team:${DEV_TEAM_ID}` }, { $inc: { bytesUsed: bytes.length, fileCount: 1 } }, { upsert: true });
  }
  return pinnedKey;
}

const config = loadConfig();
const db = await connectMongo(config.MONGODB_URL);
try {
  await ensureIndexes(db);
  await migrateCreditUnits(storeOf(db));
  const accounts = createAccountsRepository(storeOf(db));
  let account = await accounts.forAccount(DEV_ACCOUNT_ID).get();
  const newKey = process.argv.includes('--new-key');
  const created = !account;
  if (!account) {
    account = await accounts.createAccount({
      id: DEV_ACCOUNT_ID,
      name: 'Development',
      plan: 'pro',
      credits: config.DEV_ACCOUNT_CREDITS,
    });
  }
  const pinnedKey = await ensureDriveDemo(db, accounts, account._id);
  // The two agents of the development account (agt_research, agt_outreach); idempotent.
  await seedDevAgents(storeOf(db), account._id);
  const lines: string[] = [];
  if (created || newKey) {
    const { key } = await accounts.forAccount(account._id).createKey({ name: 'development', scopes: [...SCOPES] });
    lines.push(
      '',
      `  Development account ready (plan pro, ${fromUnits(account.millicredits)} credits).`,
      '  API key (shown once, stored only as a hash):',
      '',
      `    ${key}`,
      '',
      `  Try: curl -H "Authorization: Bearer ${key}" ${config.PUBLIC_BASE_URL}/api/v1/account`,
    );
  } else {
    console.error(
      `[bootstrap] development account ${DEV_ACCOUNT_ID} exists (key printed at first start; npm run key for a new one)`,
    );
  }
  if (pinnedKey) {
    lines.push(
      '',
      '  Drive key pinned to the folder "Shared" (drive:read, drive:write; shown once):',
      '',
      `    ${pinnedKey}`,
      '',
      `  It sees only "Shared" and its subfolders. Demo team drive: ${config.PUBLIC_BASE_URL}/api/v1/drive/files?teamId=${DEV_TEAM_ID}`,
    );
  }
  // To the terminal (stderr), not stdout: stdout carries the service's JSON log, which a log
  // collector ingests, and keys must never reach a log.
  if (lines.length) console.error([...lines, ''].join('\n'));
} finally {
  await db.close();
}
