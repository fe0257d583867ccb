import { newId } from '../infra/ids';
import { COLLECTIONS, type Database, type Store, openStore } from '../infra/mongo';
import type { TeamDoc, TeamMemberDoc } from './drive.types';

/**
 * Minimal team membership for team drives (SPEC 2.19 `teams`, 4.10 "team drives are read-only
 * over the API"). A team has a name and an owning account (whose storage holds the team drive);
 * team_members holds one document per (team, account) with a role. There is no API to manage
 * teams: they are made by the console (here: scripts/bootstrap.ts and tests).
 */
export interface TeamMembership {
  team: TeamDoc;
  role: TeamMemberDoc['role'];
}

const memberId = (teamId: string, memberAccountId: string) => `${teamId}:${memberAccountId}`;

const indexed = new WeakSet<Database>();

// Top level, no forAccount: a team is shared by accounts, and the account ids below name members, not a tenant.
export function createTeams(store: Store) {
  const db = openStore(store);
  const teams = db.db.collection<TeamDoc>(COLLECTIONS.teams);
  const members = db.db.collection<TeamMemberDoc>(COLLECTIONS.teamMembers);
  const ensureIndexes = async () => {
    if (indexed.has(db)) return;
    await members.createIndex({ accountId: 1 });
    await members.createIndex({ teamId: 1 });
    indexed.add(db);
  };

  return {
    /** The teams `memberAccountId` belongs to, by name. Two reads. */
    async listForAccount(memberAccountId: string): Promise<TeamMembership[]> {
      await ensureIndexes();
      const mine = await members.find({ accountId: memberAccountId }).toArray();
      if (mine.length === 0) return [];
      const docs = await teams.find({ _id: { $in: mine.map((m) => m.teamId) } }).toArray();
      const byId = new Map(docs.map((t) => [t._id, t]));
      return mine
        .flatMap((m) => {
          const team = byId.get(m.teamId);
          return team ? [{ team, role: m.role }] : [];
        })
        .sort((a, b) =>
          a.team.name < b.team.name ? -1 : a.team.name > b.team.name ? 1 : a.team._id < b.team._id ? -1 : 1,
        );
    },

    /** The membership of `memberAccountId` (the caller's account) in `teamId`, or null (not a member, or no such team). */
    async membership(teamId: string, memberAccountId: string): Promise<TeamMembership | null> {
      const m = await members.findOne({ _id: memberId(teamId, memberAccountId) });
      if (!m) return null;
      const team = await teams.findOne({ _id: teamId });
      return team ? { team, role: m.role } : null;
    },

    /** Create a team owned by `ownerAccountId` (its first member, role owner). */
    async createTeam(input: { name: string; ownerAccountId: string; id?: string }): Promise<TeamDoc> {
      await ensureIndexes();
      const team: TeamDoc = {
        _id: input.id ?? newId('team'),
        name: input.name,
        ownerAccountId: input.ownerAccountId,
        createdAt: new Date(),
      };
      await teams.insertOne(team);
      await this.addMember(team._id, input.ownerAccountId, 'owner');
      return team;
    },

    /** Add (or change the role of) a member. Idempotent. */
    async addMember(teamId: string, memberAccountId: string, role: TeamMemberDoc['role']): Promise<void> {
      await ensureIndexes();
      await members.updateOne(
        { _id: memberId(teamId, memberAccountId) },
        { $set: { teamId, accountId: memberAccountId, role }, $setOnInsert: { createdAt: new Date() } },
        { upsert: true },
      );
    },

    async removeMember(teamId: string, memberAccountId: string): Promise<void> {
      await members.deleteOne({ _id: memberId(teamId, memberAccountId) });
    },
  };
}
