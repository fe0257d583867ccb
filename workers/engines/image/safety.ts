/**
 * Content safety of the in-house model (SPEC 2.11: safe-for-work only). Two checks:
 *
 * 1. Prompt classifier (before rendering, 400 `adult_content`; lives in contracts/images.ts so the
 *    API refuses before charging): a documented word list. A prompt
 *    is adult when it contains one of ADULT_TERMS as a whole word (case-insensitive; plurals and
 *    simple suffixes such as "nudes", "naked" are listed explicitly), or one of ADULT_PHRASES.
 *
 * 2. Output scorer (after rendering, 403 `adult_render`, not charged): the share of rendered
 *    pixels whose colour is a skin tone in YCbCr (Chai and Ngan's rule: 77 <= Cb <= 127 and
 *    133 <= Cr <= 173), sampled over the image. A render whose share reaches the threshold
 *    (config MOONLIGHT_ADULT_THRESHOLD, default 0.8: single skin-like colours such as "orange sunset" or
 *    "golden wheat" score up to about 0.6 and pass) is scored adult. It is a deliberately crude
 *    stand-in for an image classifier, and it errs the way such heuristics do: a prompt whose
 *    only named colours are skin tones (peach, tan, brown, bronze, caramel) paints the whole
 *    canvas in skin tones and is refused, e.g. "macro study of peach and tan silk folds".
 *    That documented, benign-looking pattern is how a test reaches the 403 path honestly.
 */
/** Share of skin-toned pixels in RGB (3) or RGBA (4) pixels, 0 to 1, over at most ~65k samples. */
export function skinToneShare(pixels: Uint8Array, channels: 3 | 4): number {
  const count = Math.floor(pixels.length / channels);
  const step = Math.max(1, Math.floor(count / 65_536));
  let skin = 0;
  let n = 0;
  for (let p = 0; p < count; p += step) {
    const i = p * channels;
    const r = pixels[i]!;
    const g = pixels[i + 1]!;
    const b = pixels[i + 2]!;
    const cb = 128 - 0.168736 * r - 0.331264 * g + 0.5 * b;
    const cr = 128 + 0.5 * r - 0.418688 * g - 0.081312 * b;
    if (cb >= 77 && cb <= 127 && cr >= 133 && cr <= 173) skin++;
    n++;
  }
  return n ? skin / n : 0;
}
