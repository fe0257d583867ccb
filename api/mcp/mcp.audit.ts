import { clip } from '../../platform/infra/errors';

/** The route recorded in the audit log for MCP calls (the tool name goes in `tool`). */
export const MCP_AUDIT_ROUTE = '/mcp';

/** At most this many argument names are recorded per call, each cut to ECHO_MAX characters. */
const ARG_NAMES_MAX = 50;

/**
 * The names of a call's top-level arguments, for the audit log (SPEC 8: for MCP calls only
 * argument names, never values). Bounded: names are caller input too.
 */
export const argNamesOf = (args: unknown): string[] =>
  args && typeof args === 'object' && !Array.isArray(args)
    ? Object.keys(args)
        .slice(0, ARG_NAMES_MAX)
        .map((n) => clip(n))
    : [];
