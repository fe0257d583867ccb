import { Router } from 'express';
import type { AuthCache } from '../../platform/accounts';
import type { AuditRecorder } from '../../platform/audit/audit.recorder';
import type { Runtime } from '../../platform/runtime';

/** What the MCP server shares with the REST API of this process. */
export interface McpParts {
  authCache: AuthCache;
  audit: AuditRecorder;
}

/** The Model Context Protocol server (Streamable HTTP), mounted at /mcp. */
export function mcpRoutes(_rt: Runtime, _parts: McpParts): Router {
  return Router();
}
