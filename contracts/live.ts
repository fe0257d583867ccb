import { z } from 'zod';
import { line } from './common';
import { ChatArtifact } from './conversations';

/**
 * SPEC 4.8: POST /live/session (a short-lived token for the realtime engine, a WebSocket at
 * /realtime) and POST /live/action (one server tool of a live conversation). The realtime message
 * protocol is documented in the README ("Realtime protocol").
 */

/** Personas POST /live/session opens: the desk robot (persona conversations are opened by POST /personas/{id}/conversations). WARNING: public contract. */
export const LIVE_PERSONAS = ['robot'] as const;

/** Server tools of a live conversation by category (SPEC 4.8). WARNING: public contract; add, never rename. */
export const LIVE_ACTION_CATEGORIES = {
  search: ['search_web'],
  presentations: ['create_presentation'],
  notes: ['create_notes', 'create_document'],
  flowcharts: ['create_flowchart', 'add_flowchart_steps'],
  whiteboards: ['create_whiteboard'],
  images: ['generate_image'],
  projects: ['list_projects'],
  account: ['get_account'],
  memory: ['remember', 'recall', 'forget'],
} as const;
export const LIVE_ACTIONS = Object.values(LIVE_ACTION_CATEGORIES).flat() as [LiveAction, ...LiveAction[]];
export type LiveAction = (typeof LIVE_ACTION_CATEGORIES)[keyof typeof LIVE_ACTION_CATEGORIES][number];

/**
 * Tools the client (the robot) runs itself: offered to the assistant only when the session asks
 * for them in `clientTools`; the realtime engine sends `tool.call` and waits for `tool_result`.
 */
export const LIVE_CLIENT_TOOLS = ['get_device_status', 'set_volume'] as const;
export type LiveClientTool = (typeof LIVE_CLIENT_TOOLS)[number];

/** Energy-based turn detection on the incoming PCM (realtime engine). */
export const TurnDetection = z
  .strictObject({
    type: z
      .literal('energy', { error: 'must be "energy"' })
      .default('energy')
      .describe('Energy (RMS) voice activity detection over 20 ms frames.'),
    rmsThreshold: z
      .number({ error: 'must be a number' })
      .int({ error: 'must be an integer' })
      .min(50, { error: 'must be at least 50' })
      .max(20_000, { error: 'must be at most 20000' })
      .default(500)
      .describe(
        'A 20 ms frame whose RMS (of s16 samples, 0 to 32767) reaches this is speech; quieter frames are silence. Default 500 (about -36 dBFS).',
      ),
    silenceMs: z
      .number({ error: 'must be a number' })
      .int({ error: 'must be an integer' })
      .min(200, { error: 'must be at least 200' })
      .max(5000, { error: 'must be at most 5000' })
      .default(700)
      .describe("Silence after speech that ends the user's turn. Default 700 ms."),
    minSpeechMs: z
      .number({ error: 'must be a number' })
      .int({ error: 'must be an integer' })
      .min(20, { error: 'must be at least 20' })
      .max(2000, { error: 'must be at most 2000' })
      .default(100)
      .describe('Speech shorter than this (a click, a cough) is not a turn. Default 100 ms.'),
    maxTurnMs: z
      .number({ error: 'must be a number' })
      .int({ error: 'must be an integer' })
      .min(1000, { error: 'must be at least 1000' })
      .max(60_000, { error: 'must be at most 60000' })
      .default(30_000)
      .describe(
        'A turn that goes on this long ends anyway (bounds the audio held per connection: 24 kHz × 2 bytes × 30 s = 1.44 MB). Default 30 s.',
      ),
  })
  .meta({ id: 'LiveTurnDetection' });
export type TurnDetection = z.output<typeof TurnDetection>;

const bool = (d: string) => z.boolean({ error: 'must be a boolean' }).describe(d);

/** SPEC 4.8 body of POST /live/session. */
export const LiveSessionRequest = z
  .strictObject({
    persona: z
      .enum(LIVE_PERSONAS, { error: `must be one of ${LIVE_PERSONAS.join(', ')}` })
      .default('robot')
      .describe('Who speaks: `robot`, the assistant speaking through a desk robot.'),
    voice: z
      .string({ error: 'must be a string' })
      .max(64, { error: 'must be at most 64 characters' })
      .optional()
      .describe(
        'A voice name from GET /speech/voices; omit or "default" for the default voice. Unknown: 400 naming voice.',
      ),
    resumptionHandle: z
      .string({ error: 'must be a string' })
      .max(1024, { error: 'must be at most 1024 characters' })
      .regex(/^[A-Za-z0-9._-]+$/, {
        error: 'must be a resumption handle as the realtime engine sent it (letters, digits, ".", "_" and "-")',
      })
      .optional()
      .describe(
        "The newest `resumption` handle a dropped session sent: the new token continues that session's conversation with its locked settings, free. Forged: 400 invalid_resumption_handle; expired or superseded: 400 resumption_handle_expired; another account's: 404; a session that was ended: 400 session_ended. The session keeps the settings it was opened with (the other fields are ignored).",
      ),
    deviceName: line(64)
      .trim()
      .min(1, { error: 'must not be empty' })
      .optional()
      .describe("The robot's own name (at most 64 characters); ambient sessions answer only turns that address it."),
    ambient: bool(
      'Always listening: the assistant answers only turns that name deviceName. Needs the account feature proactiveAudio (else 400 ambient_not_available) and a deviceName.',
    ).optional(),
    clientTools: z
      .array(z.enum(LIVE_CLIENT_TOOLS, { error: `must be one of ${LIVE_CLIENT_TOOLS.join(', ')}` }), {
        error: 'must be an array',
      })
      .max(LIVE_CLIENT_TOOLS.length)
      .optional()
      .describe(
        'Tools the client runs itself and offers to the assistant: the engine sends tool.call and waits for tool_result.',
      ),
    turnDetection: TurnDetection.optional().describe('Voice activity detection settings; defaults as documented.'),
    tools: z
      .array(
        z.enum(LIVE_ACTIONS, {
          error: (iss) =>
            `${JSON.stringify(iss.input)?.slice(0, 40) ?? 'this'} is not a live action; must be one of ${LIVE_ACTIONS.join(', ')}`,
        }),
        { error: 'must be an array' },
      )
      .max(LIVE_ACTIONS.length * 2, { error: `must have at most ${LIVE_ACTIONS.length * 2} items` })
      .optional()
      .describe(
        'The server tools (POST /live/action actions) the assistant may call in this session, locked into it (resuming keeps them); omit for all. A restricted device or kiosk passes only what it needs. Unknown: 400 naming tools.<index>.',
      ),
  })
  .meta({ id: 'LiveSessionRequest' });
export type LiveSessionRequest = z.infer<typeof LiveSessionRequest>;

export const LiveCapabilities = z
  .object({
    audioIn: z
      .boolean()
      .describe(
        'PCM turns are understood: true only when a transcription engine is configured. Without it binary frames answer an error event (text turns only).',
      ),
    textIn: z.boolean().describe('input_text events: always true.'),
    audioOut: z.boolean().describe("The assistant's replies also come as binary PCM frames (s16le, 24 kHz, mono)."),
  })
  .meta({ id: 'LiveCapabilities' });
export type LiveCapabilities = z.infer<typeof LiveCapabilities>;

export const LiveSessionResponse = z
  .object({
    sessionId: z.string().describe('live_…; the same for every token of a resumed conversation.'),
    token: z
      .string()
      .describe(
        'Signed, single-use, valid until expiresAt; send it as ?token= on the WebSocket URL or as the first message {type:"auth", token}.',
      ),
    expiresAt: z.string().describe('ISO 8601: connect before this.'),
    realtimeUrl: z.string().describe('ws:// or wss:// URL of the realtime engine.'),
    persona: z
      .string()
      .describe(
        "Who speaks: `robot` for sessions opened here; a persona conversation's session (POST /personas/{id}/conversations, resumed here by its handle) answers `persona:<personaId>@<version>`.",
      ),
    voice: z.string().describe('The catalogue voice that speaks (default resolved).'),
    deviceName: z.string().nullable(),
    ambient: z.boolean(),
    tools: z
      .array(z.string())
      .describe(
        "Server tools the assistant may call: the POST /live/action list, less the actions the key's scopes do not allow (list_projects, get_account and recall need read; add_flowchart_steps, remember and forget need write); for a persona conversation, only the actions its persona's tools map to (memory tools never).",
      ),
    clientTools: z.array(z.enum(LIVE_CLIENT_TOOLS)).describe('Tools the client runs, as declared.'),
    turnDetection: TurnDetection,
    capabilities: LiveCapabilities,
    resumed: z.boolean().describe('True when the token continues an earlier conversation (resumptionHandle).'),
    charged: z.number().describe('Credits charged: the live_session price for a new session, 0 for a resumption.'),
  })
  .meta({ id: 'LiveSessionResponse' });
export type LiveSessionResponse = z.infer<typeof LiveSessionResponse>;

/** SPEC 4.8 body of POST /live/action. */
export const LiveActionRequest = z
  .strictObject({
    action: z.enum(LIVE_ACTIONS, { error: `must be one of ${LIVE_ACTIONS.join(', ')}` }).describe(
      `The server tool. Categories: ${Object.entries(LIVE_ACTION_CATEGORIES)
        .map(([c, a]) => `${c} (${a.join(', ')})`)
        .join('; ')}.`,
    ),
    params: z
      .record(z.string(), z.unknown(), { error: 'must be an object' })
      .default({})
      .describe(
        "The call's arguments as the conversation produced them; validated per action (400 naming params.<field>).",
      ),
  })
  .meta({ id: 'LiveActionRequest' });
export type LiveActionRequest = z.infer<typeof LiveActionRequest>;

export const LiveActionResponse = z
  .object({
    action: z.enum(LIVE_ACTIONS),
    ok: z.boolean().describe('False when the tool could not do it (the line says why; nothing was charged).'),
    line: z.string().describe('One sentence to hand back to the user (to speak).'),
    artifacts: z.array(ChatArtifact).describe('What was made, as in chat (an `error` artifact when it failed).'),
    charged: z
      .number()
      .describe(
        "Credits charged: live_action on success, plus the media tool's own price (generate_image: image); 0 on failure.",
      ),
  })
  .meta({ id: 'LiveActionResponse' });
export type LiveActionResponse = z.infer<typeof LiveActionResponse>;
