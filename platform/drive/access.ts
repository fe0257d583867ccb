import type { DriveTeam } from '../../contracts/drive';
import { AppError } from '../infra/errors';
import type { ApiKeyDoc, Store } from '../infra/mongo';
import type { DriveFolderDoc } from './drive.types';
import { createTeams, type TeamMembership } from './teams.repository';
import type { z } from 'zod';

/**
 * Who is asking, for every Drive read and write (files, folders, links, text, search): the
 * account, the key (download links name it) and the key's folder pins.
 *
 * Pins (ApiKeyDoc.folderPins): when non-empty the key sees and changes only those folders and
 * their descendants. A folder is inside when its id or one of its `path` ids is pinned; a file is
 * inside when its folder is. Root files are outside every pin. Outside is 404 everywhere.
 */
export interface DriveCaller {
  accountId: string;
  keyId: string;
  pins: readonly string[];
}

export const driveCallerOf = (key: Pick<ApiKeyDoc, '_id' | 'accountId' | 'folderPins'>): DriveCaller => ({
  accountId: key.accountId,
  keyId: key._id,
  pins: key.folderPins ?? [],
});

export const isPinned = (caller: DriveCaller) => caller.pins.length > 0;

/** True when `folder` is inside the caller's pins (always, for a key without pins). */
export const folderInsidePins = (caller: DriveCaller, folder: Pick<DriveFolderDoc, '_id' | 'path'>): boolean =>
  !isPinned(caller) || caller.pins.includes(folder._id) || folder.path.some((id) => caller.pins.includes(id));

export type DriveRole = TeamMembership['role'];

/** One drive as the caller reaches it: the personal drive or a team drive (read-only over the API). */
export interface DriveScope {
  type: 'personal' | 'team';
  /** The account id (personal) or the team id. */
  id: string;
  name: string;
  role: DriveRole;
  /** Document owner fields of this drive: every query on it filters on both. */
  accountId: string;
  teamId: string | null;
  /** Team drives are read-only over the API: a write answers 403 team_drive_read_only. */
  readOnly: boolean;
  /** The storage meter's document id (drive_usage): the account id or `team:<teamId>`. */
  usageId: string;
  caller: DriveCaller;
}

export const usageIdOf = (owner: { accountId: string; teamId: string | null }) =>
  owner.teamId ? `team:${owner.teamId}` : owner.accountId;

export const teamDriveReadOnly = () =>
  new AppError(
    'team_drive_read_only',
    'team drives are read-only over the API: this file or folder is in a team drive',
  );

/** The personal drive of the caller. */
export function personalScope(caller: DriveCaller, name = 'My Drive'): DriveScope {
  return {
    type: 'personal',
    id: caller.accountId,
    name,
    role: 'owner',
    accountId: caller.accountId,
    teamId: null,
    readOnly: false,
    usageId: caller.accountId,
    caller,
  };
}

/** The scope of a team drive from a membership. */
export function teamScope(caller: DriveCaller, m: TeamMembership): DriveScope {
  return {
    type: 'team',
    id: m.team._id,
    name: m.team.name,
    role: m.role,
    accountId: m.team.ownerAccountId,
    teamId: m.team._id,
    readOnly: true,
    usageId: `team:${m.team._id}`,
    caller,
  };
}

/**
 * The drive a Drive request works on: the caller's personal drive, or with `teamId` the team's
 * drive when the caller's account is a member (404 otherwise, like any resource not theirs).
 */
export async function resolveDriveScope(
  store: Store,
  caller: DriveCaller,
  opts: { teamId?: string | null; accountName?: string } = {},
): Promise<DriveScope> {
  if (!opts.teamId) return personalScope(caller, opts.accountName);
  const m = await createTeams(store).membership(opts.teamId, caller.accountId);
  if (!m) throw new AppError('not_found', 'teamId: team not found');
  return teamScope(caller, m);
}

/** The caller's teams as answered in DriveFileList.teams. */
export async function listCallerTeams(store: Store, caller: DriveCaller): Promise<z.infer<typeof DriveTeam>[]> {
  return (await createTeams(store).listForAccount(caller.accountId)).map((m) => ({
    id: m.team._id,
    name: m.team.name,
    role: m.role,
  }));
}
