import { DEFAULT_VOICE, type Voice } from '../../contracts/speech';
import { AppError } from '../infra/errors';

/** Engine name of the local synthesiser (X-Speech-Engine, Voice.engine). WARNING: public contract. */
export const ESPEAK_ENGINE_NAME = 'espeak-ng-local';
export const openAiSpeechEngineName = (model: string) => `openai-compatible:${model}`;

/** A catalogue voice and what its engine calls it. */
export interface VoiceEntry extends Voice {
  /** espeak-ng `-v` argument (language voice + variant), or the provider's voice name. */
  engineVoice: string;
}

/**
 * The espeak-ng voices offered: a curated set of its languages, each with a female variant (f3)
 * and its default male one, plus the robot variant for the desk-robot persona. Names are
 * `<language>-<gender>`. WARNING: names are public (clients store them); add, never rename.
 */
const ESPEAK: readonly [
  name: string,
  language: string,
  gender: 'female' | 'male' | null,
  engineVoice: string,
  description: string,
][] = [
  ['en-us-female', 'en-US', 'female', 'en-us+f3', 'American English, female variant.'],
  ['en-us-male', 'en-US', 'male', 'en-us', 'American English, male.'],
  ['en-gb-female', 'en-GB', 'female', 'en-gb+f3', 'British English, female variant.'],
  ['en-gb-male', 'en-GB', 'male', 'en-gb', 'British English, male.'],
  ['en-us-robot', 'en-US', null, 'en-us+UniRobot', 'American English through a robotic filter (the desk robot).'],
  ['fr-female', 'fr-FR', 'female', 'fr-fr+f3', 'French (France), female variant.'],
  ['fr-male', 'fr-FR', 'male', 'fr-fr', 'French (France), male.'],
  ['de-female', 'de-DE', 'female', 'de+f3', 'German, female variant.'],
  ['de-male', 'de-DE', 'male', 'de', 'German, male.'],
  ['es-female', 'es-ES', 'female', 'es+f3', 'Spanish (Spain), female variant.'],
  ['es-male', 'es-ES', 'male', 'es', 'Spanish (Spain), male.'],
  ['it-female', 'it-IT', 'female', 'it+f3', 'Italian, female variant.'],
  ['it-male', 'it-IT', 'male', 'it', 'Italian, male.'],
  ['pt-br-female', 'pt-BR', 'female', 'pt-br+f3', 'Brazilian Portuguese, female variant.'],
  ['pt-br-male', 'pt-BR', 'male', 'pt-br', 'Brazilian Portuguese, male.'],
  ['nl-female', 'nl-NL', 'female', 'nl+f3', 'Dutch, female variant.'],
  ['nl-male', 'nl-NL', 'male', 'nl', 'Dutch, male.'],
];
const ESPEAK_DEFAULT = 'en-us-female';

/** The voices of OpenAI's speech API; they follow the language of the text. Gender is not stated by the provider. */
const OPENAI = [
  'alloy',
  'ash',
  'ballad',
  'coral',
  'echo',
  'fable',
  'nova',
  'onyx',
  'sage',
  'shimmer',
  'verse',
] as const;
const OPENAI_DEFAULT = 'alloy';

export interface VoiceCatalogue {
  readonly engine: string;
  readonly voices: readonly VoiceEntry[];
  readonly default: VoiceEntry;
  /** The entry for a request's `voice` (omitted or "default": the default); 400 naming `voice` when unknown. */
  resolve(name: string | undefined): VoiceEntry;
  /** The public view (GET /speech/voices). */
  list(): Voice[];
}

/**
 * The voices of the configured speech engine (config SPEECH_ENGINE; the API and the speech pool
 * read the same one, so a name the API accepts is one the pool can speak).
 */
export function voiceCatalogue(config: { SPEECH_ENGINE: 'local' | 'openai'; SPEECH_MODEL: string }): VoiceCatalogue {
  const voices: VoiceEntry[] =
    config.SPEECH_ENGINE === 'openai'
      ? OPENAI.map((v) => ({
          name: v,
          language: 'mul',
          gender: null,
          engine: openAiSpeechEngineName(config.SPEECH_MODEL),
          default: v === OPENAI_DEFAULT,
          description: `The provider's "${v}" voice; speaks the language of the text.`,
          engineVoice: v,
        }))
      : ESPEAK.map(([name, language, gender, engineVoice, description]) => ({
          name,
          language,
          gender,
          engine: ESPEAK_ENGINE_NAME,
          default: name === ESPEAK_DEFAULT,
          description,
          engineVoice,
        }));
  const byName = new Map(voices.map((v) => [v.name, v]));
  const def = voices.find((v) => v.default)!;
  return {
    engine: def.engine,
    voices,
    default: def,
    resolve(name) {
      if (name === undefined || name === DEFAULT_VOICE) return def;
      const v = byName.get(name);
      if (!v)
        throw new AppError(
          'validation_error',
          `voice: unknown voice "${name.slice(0, 64)}"; GET /speech/voices lists the ${voices.length} voices (or send "default")`,
        );
      return v;
    },
    list: () => voices.map(({ engineVoice: _, ...v }) => v),
  };
}
