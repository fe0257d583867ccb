import { z } from 'zod';
import { ID_RULE, text } from './common';
import { CHAT_MODES, ChatArtifact, MessageEngine, MessageUsage } from './conversations';

/**
 * POST /chat (SPEC 2.7, 4.6, 8). WARNING: field names are public contract.
 */
export const CHAT_LIMITS = {
  /** SPEC 8: `messages` max 40 items. */
  messagesMax: 40,
  /** Characters of `message` and of each `messages[].content`. */
  contentMax: 20_000,
  /** A new conversation's title: the first user message, cut to this many characters. */
  titleMax: 80,
} as const;

export const CHAT_INPUT_ROLES = ['user', 'assistant'] as const;

const content = text(CHAT_LIMITS.contentMax).min(1, { error: 'must not be empty' });

export const ChatInputMessage = z
  .strictObject({
    role: z.enum(CHAT_INPUT_ROLES, { error: `must be one of ${CHAT_INPUT_ROLES.join(', ')}` }),
    content,
  })
  .meta({ id: 'ChatInputMessage' });

export const ChatRequest = z
  .strictObject({
    conversationId: z
      .string({ error: 'must be a string' })
      .regex(new RegExp(ID_RULE.pattern), { error: `must be 1 to ${ID_RULE.maxLength} letters, digits, _ and -` })
      .max(ID_RULE.maxLength, { error: `must be 1 to ${ID_RULE.maxLength} letters, digits, _ and -` })
      .optional()
      .describe(
        "Continue this conversation: its stored history is loaded server-side. Needs the read and write scopes besides ai (else 403 forbidden). Another account's or an unknown id is 404. Omitted: a new conversation is created, titled from the first user message (its id comes back in the X-Conversation-Id header, the stream's start metadata, or conversationId of the JSON answer).",
      ),
    message: content
      .optional()
      .describe(
        `A single user message (at most ${CHAT_LIMITS.contentMax} characters). Send exactly one of message and messages.`,
      ),
    messages: z
      .array(ChatInputMessage)
      .min(1, { error: 'must hold at least 1 item' })
      .max(CHAT_LIMITS.messagesMax, { error: `must hold at most ${CHAT_LIMITS.messagesMax} items` })
      .optional()
      .describe(
        `Up to ${CHAT_LIMITS.messagesMax} messages, oldest first, the last one from the user. Without conversationId they are the whole history and all of them are stored in the new conversation; ` +
          'with conversationId the stored history stands and only the last user message is added (clients that resend the whole history do not duplicate it).',
      ),
    mode: z
      .enum(CHAT_MODES, { error: `must be one of ${CHAT_MODES.join(', ')}` })
      .optional()
      .describe(
        "fast (up to 3 engine steps) or think (up to 6: plans further and may chain tools). Default: the conversation's mode, else fast.",
      ),
    stream: z
      .boolean({ error: 'must be a boolean' })
      .default(true)
      .describe('true (default): an AI SDK v5 UI-message stream over SSE; false: ChatJsonResponse.'),
  })
  .superRefine((b, ctx) => {
    if (b.message !== undefined && b.messages !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['message'],
        message: 'send exactly one of message and messages, not both',
      });
    else if (b.message === undefined && b.messages === undefined)
      ctx.addIssue({ code: 'custom', path: ['message'], message: 'is required (or messages)' });
    else {
      // Refinements run even when a member failed (zod 4): read defensively.
      const last = Array.isArray(b.messages) ? (b.messages.at(-1) as { role?: unknown } | undefined) : undefined;
      if (last && typeof last === 'object' && last.role === 'assistant')
        ctx.addIssue({
          code: 'custom',
          path: ['messages', b.messages!.length - 1, 'role'],
          message: 'the last message must be from the user',
        });
    }
  })
  .meta({ id: 'ChatRequest', oneOf: [{ required: ['message'] }, { required: ['messages'] }] }); // exactly one, as the refinement says
export type ChatRequest = z.output<typeof ChatRequest>;

/** SPEC 2.7 ChatJsonResponse (stream false). */
export const ChatJsonResponse = z
  .object({
    conversationId: z.string(),
    mode: z.enum(CHAT_MODES),
    message: z.object({
      id: z
        .string()
        .describe(
          "The stored message (GET /conversations/{id}/messages); the same id as messageId of a stream's start chunk.",
        ),
      role: z.literal('assistant'),
      content: z.string(),
      artifacts: z.array(ChatArtifact),
      engine: MessageEngine.nullable().describe(
        'The engine that answered; null for white-label accounts (account feature whiteLabel).',
      ),
    }),
    usage: MessageUsage,
  })
  .meta({ id: 'ChatJsonResponse' });
export type ChatJsonResponse = z.infer<typeof ChatJsonResponse>;

/** What the stream=true answer of POST /chat is, for the OpenAPI document. */
export const CHAT_STREAM_DESCRIPTION =
  'stream true (default): the Vercel AI SDK v5 UI-message stream over SSE (headers content-type text/event-stream, cache-control no-cache, x-vercel-ai-ui-message-stream v1, x-accel-buffering no, X-Conversation-Id). ' +
  'One `data: <json>` line per chunk, no `event:` lines: start {messageId, messageMetadata {conversationId, mode}}, then per engine step start-step, text-start / text-delta / text-end (same id), ' +
  'tool-input-start {toolCallId, toolName}, tool-input-available {toolCallId, toolName, input}, tool-output-available {toolCallId, output: ChatArtifact}, finish-step; then finish {messageMetadata {conversationId, usage}} and `data: [DONE]`. ' +
  '`: keepalive` comment lines arrive every CHAT_KEEPALIVE_MS (10 s) while the turn works. An engine failure mid-stream is an error chunk {errorText}, then finish and [DONE]; the turn is not charged. ' +
  'stream false: ChatJsonResponse.';
