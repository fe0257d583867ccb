import { SPEECH_AUDIO } from '../../contracts/speech';

/**
 * Longest audio one POST /speech call produces. The charge is per character, and some
 * characters read out long ("㎏" is "kilograms"), so without a cap 300 characters (3 credits)
 * could make 100 s of audio. The pool stops the engine here and the stream ends cleanly at
 * exactly this length; the X-Audio-Max-Seconds header tells the client.
 */
export const SPEECH_AUDIO_MAX_SECONDS = 30;
export const SPEECH_AUDIO_MAX_BYTES =
  SPEECH_AUDIO_MAX_SECONDS * SPEECH_AUDIO.sampleRate * SPEECH_AUDIO.bytesPerSample * SPEECH_AUDIO.channels;

/**
 * Audio the API holds for a client that does not read (the response's unsent bytes). The pool
 * cannot be paused (its chunks are not acknowledged one by one), so past this the call stops
 * and the stream is cut like any other failure after audio: no clean end, charge stands.
 * 1 MiB is about 21.8 s of audio; the pool produces audio far faster than real time, so a
 * client must read the body as it arrives (into its own buffer), not at playback speed.
 */
export const SPEECH_UNREAD_MAX_BYTES = 1024 * 1024;
