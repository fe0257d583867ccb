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
 *    (config MOONLIGHT_ADULT_THRESHOLD, default 0.8) is scored adult. The same scorer runs on the
 *    local scene renders and on a remote diffusion server's PNGs.
 *
 *    Threshold evidence, re-measured on the scene composer (`npm run bench images`):
 *    200 benign prompts x seeds chosen to be its hard cases (sunsets, dawns, fog, deserts, sand,
 *    foxes, horses, campfires, watercolour washes, skin-tone colour words such as tan, bronze,
 *    caramel) score a median of 0.30 and a maximum of 1.0; 6 of 200 (3%) reach 0.8: "orange
 *    sunset in the fog" (1.0), "caramel coloured clouds at sunset, watercolour" (1.0), three
 *    "warm golden portrait of a woman" renders (0.90 to 0.99) and "a bronze statue at sunset,
 *    watercolour" (0.85). Raising the threshold to 0.9 would pass 2 of them and 0.95 3, at the
 *    cost of passing more of what a real model might render, so the default stays 0.8 and these
 *    are documented false positives (a peach-toned foggy sky is, to this rule, skin). The
 *    documented all-skin-tone prompt "macro study of peach and tan silk folds" scores 1.0 on
 *    every seed tried and is refused; that benign-looking pattern is how the tests reach the 403
 *    path honestly. It is a deliberately crude stand-in for an image classifier.
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
