import { z } from 'zod';
import { PathId } from '../../contracts/common';
import { endpoints, type Endpoint } from '../../contracts/endpoints';
import { JOB_ID_PREFIX, type Scope } from '../../contracts/registry';
import { toUnits } from '../../platform/credits/credits';
import { driveCallerOf } from '../../platform/drive/access';
import { notFound } from '../../platform/infra/errors';
import { createImagesService } from '../../platform/images/images.service';
import { toEnvelope } from '../../platform/jobs/jobs';
import { createPresentationsService } from '../../platform/presentations/presentations.service';
import { createProjectsService } from '../../platform/projects/projects.service';
import { createResearchService } from '../../platform/research/research.service';
import type { Runtime } from '../../platform/runtime';
import { createSongsService } from '../../platform/songs/songs.service';
import { createVideosService } from '../../platform/videos/videos.service';
import { createCodeBuildsService } from '../../platform/code-builds/code-builds.service';
import { driveActorOf } from '../drive/drive.routes';
import { createDriveService } from '../../platform/drive/drive.service';
import { createDriveSearchService } from '../../platform/drive/search.service';
import type { AuthContext } from '../http/context';

/** What a tool runs with: the caller as authentication found it, and the MCP request's id. */
export interface ToolContext {
  auth: AuthContext;
  requestId: string;
  /**
   * An id for what the call creates: derived from its `idempotencyKey` record when the call has
   * one (a retry after a crash finds what the first attempt made), else fresh. The REST routes'
   * HandlerContext.idFor, for tools.
   */
  idFor(prefix: string): string;
}

/** A tool's answer: what the REST route would have answered, and the millicredits it charged. */
export interface ToolOutcome {
  payload: unknown;
  charged: number;
}

/**
 * One MCP tool, mirroring one REST endpoint of the catalogue: its scopes, its success status (for
 * the audit log) and its description come from that endpoint, its input schema from the same
 * contract the route validates with.
 */
export interface McpTool {
  /** WARNING: tool names are public (clients and their prompts call them by name); add, never rename. */
  name: string;
  endpoint: Endpoint;
  input: z.ZodObject;
  run(ctx: ToolContext, args: never): Promise<ToolOutcome>;
}

/** The input of a tool that reads one resource by id: the catalogue's path id rule. */
const ById = (what: string) => z.object({ id: PathId.describe(`Id of the ${what}.`) }).strict();

/** Typed tool definition: `run` gets the contract's parsed output. */
const tool = <S extends z.ZodObject>(
  t: Omit<McpTool, 'input' | 'run'> & { input: S; run(ctx: ToolContext, args: z.output<S>): Promise<ToolOutcome> },
): McpTool => t as unknown as McpTool;

const free = (payload: unknown): ToolOutcome => ({ payload, charged: 0 });

/**
 * A start_* tool: the endpoint's job dispatched under an id from the call (derived from its
 * idempotencyKey when it has one), answered with the job envelope and what it charged.
 */
const startJob = <S extends z.ZodObject>(
  name: string,
  endpoint: Endpoint & { body: S },
  prefix: string,
  dispatch: (ctx: ToolContext, request: z.output<S>, jobId: string) => Promise<{ envelope: unknown; charged: number }>,
): McpTool =>
  tool({
    name,
    endpoint,
    input: endpoint.body,
    run: async (ctx, request) => {
      const { envelope, charged } = await dispatch(ctx, request, ctx.idFor(prefix));
      return { payload: envelope, charged };
    },
  });

/**
 * The tools, each calling the service its REST route calls (same checks, same charges). A tool
 * whose endpoint honours Idempotency-Key takes an optional `idempotencyKey` argument instead
 * (mcp.server.ts): a retried call with the same key and arguments answers what the first one
 * made, charged once; without one, every call makes something new.
 */
export function createMcpTools(rt: Runtime): McpTool[] {
  const projects = createProjectsService(rt);
  const presentations = createPresentationsService(rt);
  const images = createImagesService(rt);
  const videos = createVideosService(rt);
  const songs = createSongsService(rt);
  const codeBuilds = createCodeBuildsService(rt);
  const research = createResearchService(rt);
  const drive = createDriveService(rt);
  const driveSearch = createDriveSearchService(rt);
  const view = async (p: ReturnType<typeof projects.create>) => free(await projects.view(await p));

  return [
    tool({
      name: 'create_flowchart',
      endpoint: endpoints.createFlowchart,
      input: endpoints.createFlowchart.body,
      run: ({ auth, idFor }, b) =>
        view(
          projects.create({
            accountId: auth.account._id,
            kind: 'flowchart',
            name: b.name,
            description: b.description,
            tags: b.tags,
            content: { nodes: b.nodes, edges: b.edges },
            idFor,
          }),
        ),
    }),
    tool({
      name: 'create_notes',
      endpoint: endpoints.createNotes,
      input: endpoints.createNotes.body,
      run: ({ auth, idFor }, b) =>
        view(
          projects.create({
            accountId: auth.account._id,
            kind: 'notes',
            name: b.name,
            description: b.description,
            tags: b.tags,
            content: { markdown: b.markdown },
            idFor,
          }),
        ),
    }),
    tool({
      name: 'create_whiteboard',
      endpoint: endpoints.createWhiteboard,
      input: endpoints.createWhiteboard.body,
      run: ({ auth, idFor }, b) =>
        view(
          projects.create({
            accountId: auth.account._id,
            kind: 'whiteboard',
            name: b.name,
            description: b.description,
            tags: b.tags,
            content: { background: b.background, elements: b.elements },
            idFor,
          }),
        ),
    }),
    tool({
      name: 'create_presentation',
      endpoint: endpoints.createPresentation,
      input: endpoints.createPresentation.body,
      run: async ({ auth, requestId, idFor }, request) => {
        const out = await presentations.create({
          accountId: auth.account._id,
          features: auth.account.features,
          requestId,
          request,
          idFor,
        });
        return { payload: out.body, charged: out.charged };
      },
    }),
    tool({
      name: 'generate_image',
      endpoint: endpoints.createImage,
      input: endpoints.createImage.body,
      run: async ({ auth, requestId }, request) => {
        const result = await images.render({ account: auth.account, requestId, request });
        return { payload: result, charged: toUnits(result.charged) };
      },
    }),
    startJob('start_video', endpoints.createVideo, JOB_ID_PREFIX.video, ({ auth, requestId }, request, jobId) =>
      videos.dispatch({ account: auth.account, requestId, request, jobId }),
    ),
    startJob('start_song', endpoints.createSong, JOB_ID_PREFIX.song, ({ auth, requestId }, request, jobId) =>
      songs.dispatch({ accountId: auth.account._id, requestId, request, jobId }),
    ),
    startJob('start_code_build', endpoints.createCodeBuild, JOB_ID_PREFIX.code, ({ auth, requestId }, request, jobId) =>
      codeBuilds.dispatch({ accountId: auth.account._id, requestId, request, jobId }),
    ),
    startJob(
      'start_research',
      endpoints.createResearch,
      JOB_ID_PREFIX.research,
      ({ auth, requestId }, request, jobId) =>
        research.dispatch({ accountId: auth.account._id, requestId, request, key: auth.key, jobId }),
    ),
    tool({
      name: 'get_job',
      endpoint: endpoints.getJob,
      input: ById('job (vid_, song_, code_, res_, deck_, space_ …) as a start_* tool answered it'),
      run: async ({ auth }, { id }) => {
        const job = await rt.jobs.forAccount(auth.account._id).find(id);
        if (!job) throw notFound('job');
        return free(toEnvelope(job));
      },
    }),
    tool({
      name: 'list_projects',
      endpoint: endpoints.listProjects,
      input: endpoints.listProjects.query,
      run: async ({ auth }, q) => free(await projects.list(auth.account._id, q)),
    }),
    tool({
      name: 'get_project',
      endpoint: endpoints.getProject,
      input: ById('project'),
      run: async ({ auth }, { id }) => free(await projects.get(auth.account._id, id)),
    }),
    tool({
      name: 'drive_list_files',
      endpoint: endpoints.listDriveFiles,
      input: endpoints.listDriveFiles.query,
      run: async ({ auth }, q) => free(await drive.list(driveActorOf(auth), q)),
    }),
    tool({
      name: 'drive_read_file',
      endpoint: endpoints.getDriveFileText,
      input: ById('Drive file'),
      run: async ({ auth }, { id }) => free((await driveSearch.text(driveCallerOf(auth.key), id)).body),
    }),
    tool({
      name: 'drive_search',
      endpoint: endpoints.searchDrive,
      input: endpoints.searchDrive.query,
      run: async ({ auth }, q) => free(await driveSearch.search(driveCallerOf(auth.key), q)),
    }),
  ];
}

/**
 * Whether a key's scopes let it call the tool ("read or ai": any one of the endpoint's scopes).
 * The scope table of the MCP tools is the endpoint catalogue's (SPEC §4): tools/list shows a key
 * only the tools this allows, and tools/call refuses the others (forbidden).
 */
export const hasScopeFor = (t: McpTool, scopes: readonly Scope[]) => t.endpoint.scopes.some((s) => scopes.includes(s));
