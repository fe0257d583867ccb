import { expect } from 'chai';
import { seedBytes } from '../../workers/engines/images/procedural';
import { renderScene } from '../../workers/engines/images/render';
import { localMoonlight } from '../../workers/engines/images/moonlight.engine';
import { SUBJECTS, TIMES, WEATHERS, parsePrompt, type Style } from '../../workers/engines/images/scene';
import { client } from '../../scripts/harness/http';
import { startStack, type Stack } from '../../scripts/harness/stack';
import {
  changedShare,
  colourCount,
  edgeDensity,
  hue,
  lumAt,
  meanRows,
  pixelsOf,
  tallestBrightColumn,
  type Pixels,
} from './pixels';

const signal = new AbortController().signal;
const render = (prompt: string, style: Style, size = 256, seed = 'fixed') =>
  renderScene(
    { width: size, height: size, seed: seedBytes('scene-test', seed), prompt, defaultStyle: style, text: {} },
    signal,
  );
const meanLum = (p: Pixels) => {
  let s = 0;
  for (let y = 0; y < p.height; y++) for (let x = 0; x < p.width; x++) s += lumAt(p, x, y);
  return s / (p.width * p.height);
};
const lumOf = ([r, g, b]: [number, number, number]) => 0.299 * r + 0.587 * g + 0.114 * b;

/** A warm sky on top: red over blue, an orange hue, brightening toward the horizon. */
function expectWarmSky(p: Pixels) {
  const top = meanRows(p, 0, Math.round(p.height * 0.05));
  const lower = meanRows(p, Math.round(p.height * 0.35), Math.round(p.height * 0.4));
  expect(top[0], 'top rows: red above blue').to.be.greaterThan(top[2] + 60);
  expect(hue(top), 'top rows: hue in the red-orange range').to.be.within(5, 45);
  expect(lumOf(lower) - lumOf(top), 'the sky brightens toward the horizon').to.be.greaterThan(30);
}

/** A tall bright vertical shape (the lighthouse tower): taller than wide, brighter than the sky beside it. */
function expectTallBrightShape(p: Pixels) {
  const shape = tallestBrightColumn(p, 225, Math.round(p.height * 0.04));
  expect(shape.run, 'height of the bright shape').to.be.greaterThan(p.height * 0.2);
  expect(shape.run, 'taller than wide').to.be.greaterThan(shape.width * 4);
  const column = (x: number) => {
    let s = 0;
    for (let y = shape.top; y < shape.top + shape.run; y++) s += lumAt(p, x, y);
    return s / shape.run;
  };
  const beside = [shape.x - shape.width - 12, shape.x + shape.width + 12]
    .filter((x) => x >= 0 && x < p.width)
    .map(column);
  expect(column(shape.x) - Math.max(...beside), 'much brighter than its neighbours').to.be.greaterThan(30);
}

describe('images: scene composer (local renders follow the prompt)', () => {
  describe('over HTTP', () => {
    let stack: Stack;
    before(async () => {
      stack = await startStack();
    });
    after(() => stack.stop());

    it('when "a lighthouse on a cliff at sunset" is rendered by moonlight, then the pixels show a warm sky gradient on top and a tall bright vertical shape', async () => {
      const { key } = await stack.createAccount({ credits: 10 });
      const r = await client(stack.baseUrl, key).post('/images/moonlight', {
        prompt: 'a lighthouse on a cliff at sunset',
        seed: 7,
      });
      expect(r.status).to.equal(200);
      const p = await pixelsOf(Buffer.from(r.body.base64.slice('data:image/png;base64,'.length), 'base64'));
      expectWarmSky(p);
      expectTallBrightShape(p);
    });

    it('when the same prompt is rendered by POST /images in oil, then the same warm sky and bright tower are there through the texture', async () => {
      const { key } = await stack.createAccount({ credits: 10 });
      const r = await client(stack.baseUrl, key).post('/images', {
        prompt: 'a lighthouse on a cliff at sunset, oil painting',
        includeBase64: true,
      });
      expect(r.status).to.equal(200);
      const p = await pixelsOf(Buffer.from(r.body.base64.slice('data:image/png;base64,'.length), 'base64'));
      expectWarmSky(p);
      expectTallBrightShape(p);
    });
  });

  describe('styles', () => {
    const prompt = 'a lighthouse on a cliff at sunset';
    const styles: Style[] = ['oil', 'watercolour', 'flat', 'photo'];
    let px: Record<Style, Pixels>;
    before(async () => {
      px = Object.fromEntries(
        await Promise.all(styles.map(async (s) => [s, await pixelsOf((await render(prompt, s, 384)).png)])),
      ) as Record<Style, Pixels>;
    });

    it('when flat vector is asked, then a poster-like handful of colours where the other styles have thousands', () => {
      expect(colourCount(px.flat)).to.be.below(300);
      for (const s of ['oil', 'watercolour', 'photo'] as const) expect(colourCount(px[s]), s).to.be.above(5000);
    });

    it('when oil painting is asked, then brush strokes: several times the edge density of every other style', () => {
      for (const s of ['watercolour', 'flat', 'photo'] as const)
        expect(edgeDensity(px.oil), s).to.be.above(edgeDensity(px[s]) * 2.5);
    });

    it('when watercolour is asked, then a lighter wash than every other style', () => {
      for (const s of ['oil', 'flat', 'photo'] as const)
        expect(meanLum(px.watercolour), s).to.be.above(meanLum(px[s]) + 10);
    });

    it('when photo-like lighting is asked, then its pixels differ from every other style over most of the frame', () => {
      for (const s of ['oil', 'watercolour', 'flat'] as const)
        expect(changedShare(px.photo, px[s], 6), s).to.be.above(0.3);
    });

    it('when the prompt or the style field names a style, then it wins over the default', () => {
      expect(parsePrompt('a boat, watercolor').style).to.equal('watercolour');
      expect(parsePrompt('a boat', 'flat vector poster').style).to.equal('flat');
      expect(parsePrompt('a boat at dawn').style).to.equal(null);
    });
  });

  describe('vocabulary', () => {
    it('when the vocabulary is listed, then it has at least 40 subjects including the documented ones', () => {
      expect(SUBJECTS.length).to.be.at.least(40);
      const ids = SUBJECTS.map((s) => s.id);
      for (const id of [
        'lighthouse',
        'cliff',
        'sea',
        'mountain',
        'forest',
        'city',
        'house',
        'cabin',
        'tree',
        'sun',
        'moon',
        'stars',
        'boat',
        'road',
        'bridge',
        'person',
        'cat',
        'dog',
        'bird',
        'flower',
      ])
        expect(ids, id).to.include(id);
      expect(parsePrompt('a city skyline').subjects.map((s) => s.id)).to.deep.equal(['city']);
      expect(parsePrompt('a person silhouette').subjects.map((s) => s.id)).to.deep.equal(['person']);
    });

    it('when each vocabulary subject is added to a prompt, then it is recognised and changes the image', async () => {
      const base = await pixelsOf((await render('a calm landscape by day', 'flat')).png);
      const weak: string[] = [];
      for (const s of SUBJECTS) {
        const prompt = `a calm landscape by day with a ${s.words[0]}`;
        expect(
          parsePrompt(prompt).subjects.map((x) => x.id),
          prompt,
        ).to.include(s.id);
        const share = changedShare(base, await pixelsOf((await render(prompt, 'flat')).png));
        if (share < 0.003) weak.push(`${s.id} ${share.toFixed(4)}`);
      }
      expect(weak, 'subjects that did not change at least 0.3% of the pixels').to.deep.equal([]);
    });

    it('when a word is part of a longer phrase naming another subject, then only the phrase counts', () => {
      expect(parsePrompt('a palm tree on a beach').subjects.map((s) => s.id)).to.deep.equal(['palm', 'beach']);
      expect(parsePrompt('a street lamp by sand dunes').subjects.map((s) => s.id)).to.deep.equal([
        'lamppost',
        'desert',
      ]);
    });

    it('when a colour word comes right before a subject, then it colours that subject', () => {
      const spec = parsePrompt('a red kite over green hills');
      expect(spec.subjects).to.deep.include({ id: 'kite', colour: [204, 36, 36] });
      expect(spec.subjects).to.deep.include({ id: 'hills', colour: [34, 139, 34] });
      expect(spec.colours).to.deep.equal([]);
    });

    it('when the prompt names no subject, time or weather, then colour and mood words set the palette', async () => {
      const teal = await pixelsOf((await render('an abstract composition in teal and turquoise', 'photo')).png);
      const crimson = await pixelsOf((await render('an abstract composition in crimson and scarlet', 'photo')).png);
      const [tr, , tb] = meanRows(teal, 0, teal.height);
      const [cr, , cb] = meanRows(crimson, 0, crimson.height);
      expect(tb).to.be.above(tr);
      expect(cr).to.be.above(cb + 40);
    });
  });

  describe('robustness', () => {
    it('when a prompt names every vocabulary word, or only non-Latin text, then it still renders at the exact size', async () => {
      const every = [
        ...SUBJECTS.flatMap((s) => s.words),
        ...Object.values(TIMES).flat(),
        ...Object.values(WEATHERS).flat(),
      ]
        .join(' ')
        .slice(0, 1500);
      for (const prompt of [every, '東京の夜景 🌃']) {
        const r = await localMoonlight.render({ prompt, aspectRatio: '9:16', seed: 3, steps: 8, cfg: 1 }, signal);
        const p = await pixelsOf(r.png);
        expect([p.width, p.height], prompt.slice(0, 20)).to.deep.equal([768, 1344]);
        expect(r.adultScore).to.be.within(0, 1);
      }
    });
  });

  describe('determinism', () => {
    it('when the same prompt and seed are rendered twice in every style, then the bytes are identical; another seed differs', async () => {
      for (const style of ['oil', 'watercolour', 'flat', 'photo'] as const) {
        const a = await render('a cabin in a snowy forest at night', style, 320, 'one');
        const b = await render('a cabin in a snowy forest at night', style, 320, 'one');
        const c = await render('a cabin in a snowy forest at night', style, 320, 'two');
        expect(a.png.equals(b.png), style).to.equal(true);
        expect(a.png.equals(c.png), style).to.equal(false);
      }
    });
  });
});
