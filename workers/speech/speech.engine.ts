/** What a speech engine is asked: the text and its own name for the voice (catalogue `engineVoice`). */
export interface SpeechInput {
  text: string;
  voice: string;
}

/**
 * A speech synthesiser: yields 24 kHz mono signed 16-bit little-endian PCM as it is produced,
 * in chunks of whole samples (even byte counts). Stops (and frees what it runs) when `signal`
 * aborts or the consumer stops iterating. Throws AppError for what the caller should see
 * (service_unavailable when the synthesiser cannot be reached or refuses).
 */
export interface SpeechEngine {
  /** X-Speech-Engine and Voice.engine. */
  readonly name: string;
  synthesize(input: SpeechInput, ctx: { signal: AbortSignal }): AsyncIterable<Buffer>;
}
