import { expect } from 'chai';
import sharp from 'sharp';
import type { OutlineItem } from '../../contracts/presentations';
import { decodeImage, encodePng } from '../../platform/media/codec';
import { chooseLayout } from '../../workers/presentations/layout';
import {
  composeSlide,
  renderSlide,
  SLIDE_H,
  SLIDE_RENDERER,
  SLIDE_W,
  type SlideInput,
  type TextBox,
} from '../../workers/presentations/render';
import { THEMES } from '../../workers/presentations/theme';
import { fitBlock, fontMetrics, measure, type Weight } from '../../workers/presentations/typeset';

const input = (slide: OutlineItem, index = 1, over: Partial<SlideInput> = {}): SlideInput => ({
  slide,
  index,
  total: 12,
  deckName: 'Quarterly review',
  companyName: 'Acme',
  theme: THEMES.default!,
  visualStyle: 'minimal',
  mode: 'creator',
  ...over,
});

/** Text of `n` characters in words of varied length, with a long unbroken token past 120 characters. */
function textOf(n: number, seed = 0): string {
  const words = [
    'revenue',
    'grew',
    'in',
    'the',
    'EMEA',
    'region',
    'WWWWWW',
    'after',
    'a',
    'pricing',
    'change',
    'Ärger',
    'naïve',
    'AVATAR',
    'fi',
    'quarter',
  ];
  let s = '';
  for (let i = seed; s.length < n; i++)
    s += (s ? ' ' : '') + (i % 23 === 22 ? 'x'.repeat(40) : words[i % words.length]);
  return s.slice(0, n).trim() || 'W';
}

const unescapeXml = (s: string) =>
  s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&');

/** An attribute of an SVG start tag's attribute text, by name, in whatever order they come. */
const attr = (attrs: string, name: string) => new RegExp(`\\s${name}="([^"]*)"`).exec(attrs)?.[1];

/**
 * Every drawn line of a composed slide, read back from its SVG, measured with the same font
 * metrics: its ink box must lie inside the text box it belongs to. Every <text> and <tspan> of
 * the SVG must be read (at least one of each), so a change of markup cannot make this pass empty.
 */
function overflowing(c: ReturnType<typeof composeSlide>): string[] {
  const boxes = new Map(c.boxes.map((b) => [b.id, b]));
  const bad: string[] = [];
  let texts = 0;
  let spans = 0;
  for (const t of c.svg.matchAll(/<text(\s[^>]*)>(.*?)<\/text>/g)) {
    texts++;
    const box = boxes.get(attr(t[1]!, 'data-box') ?? '');
    const weight = Number(attr(t[1]!, 'font-weight')) as Weight;
    const size = Number(attr(t[1]!, 'font-size'));
    expect(box, `the text box of ${t[1]}`).to.not.equal(undefined);
    expect([weight, size].every(Number.isFinite), t[1]).to.equal(true);
    const { ascent, descent } = fontMetrics(weight);
    for (const span of t[2]!.matchAll(/<tspan(\s[^>]*)>(.*?)<\/tspan>/g)) {
      spans++;
      const [x, y] = [Number(attr(span[1]!, 'x')), Number(attr(span[1]!, 'y'))];
      expect([x, y].every(Number.isFinite), span[1]).to.equal(true);
      const w = measure(unescapeXml(span[2]!), size, weight);
      const x0 = attr(t[1]!, 'text-anchor') === 'end' ? x - w : x;
      if (
        x0 < box!.x - 0.5 ||
        x0 + w > box!.x + box!.w + 0.5 ||
        y - ascent * size < box!.y - 0.5 ||
        y + descent * size > box!.y + box!.h + 0.5
      )
        bad.push(`${box!.id}: "${span[2]}" at ${size}px`);
    }
  }
  expect(texts, 'text elements read')
    .to.be.at.least(1)
    .and.equal(c.svg.match(/<text[\s>]/g)?.length);
  expect(spans, 'tspan elements read')
    .to.be.at.least(1)
    .and.equal(c.svg.match(/<tspan[\s>]/g)?.length);
  return bad;
}

/** Pixels that differ between the slide and the same slide without its text, outside every text box (2 px of anti-aliasing allowed). */
async function inkByBoxes(c: ReturnType<typeof composeSlide>): Promise<{ inside: number; outside: number }> {
  const raw = async (svg: string) => await sharp(Buffer.from(svg)).removeAlpha().raw().toBuffer();
  const [full, bare] = await Promise.all([raw(c.svg), raw(c.svg.replace(/<text [^>]*>.*?<\/text>/g, ''))]);
  const within = (x: number, y: number, b: TextBox) =>
    x >= b.x - 2 && x < b.x + b.w + 2 && y >= b.y - 2 && y < b.y + b.h + 2;
  let outside = 0;
  let inside = 0;
  for (let y = 0; y < SLIDE_H; y++) {
    for (let x = 0; x < SLIDE_W; x++) {
      const o = (y * SLIDE_W + x) * 3;
      if (full[o] === bare[o] && full[o + 1] === bare[o + 1] && full[o + 2] === bare[o + 2]) continue;
      if (c.boxes.some((b) => within(x, y, b))) inside++;
      else outside++;
    }
  }
  return { inside, outside };
}

describe('slides: typesetting and rendering', () => {
  it('when titles and bullets of 1 to 300 characters are set on every layout, then no measured line leaves its text box', () => {
    const bad: string[] = [];
    for (let n = 1; n <= 300; n++) {
      const t = textOf(n);
      const b = textOf(n, 5);
      const slides: [OutlineItem, number][] = [
        [{ title: t, bullets: [b, textOf(n, 9)] }, 0],
        [{ title: t, bullets: [b, textOf(n, 3), textOf(n, 7), textOf(n, 11)] }, 1],
        [{ title: t, bullets: [] }, 2],
      ];
      if (n % 10 === 0) {
        slides.push([{ title: t, bullets: Array.from({ length: 12 }, (_, i) => textOf(n, i)) }, 3]);
        slides.push([{ title: t, bullets: [`"${b}"`, textOf(n, 2)] }, 4]);
        slides.push([{ title: t, bullets: [`Revenue grew 40% ${b}`, textOf(n, 4), textOf(n, 6)] }, 5]);
        slides.push([{ title: t, bullets: Array.from({ length: 8 }, (_, i) => textOf(Math.min(n, 60), i)) }, 6]);
      }
      for (const [slide, index] of slides)
        bad.push(
          ...overflowing(composeSlide(input(slide, index, { deckName: t }))).map(
            (m) => `${n} chars, slide ${index}: ${m}`,
          ),
        );
    }
    expect(bad.slice(0, 5)).to.deep.equal([]);
  });

  it('when a 300-character title does not fit on one line, then it shrinks, then wraps, then ends in an ellipsis', () => {
    const style = { weight: 700 as const, maxSize: 64, minSize: 36, lineHeight: 1.22, oneLineDownTo: 50 };
    const short = fitBlock(['Quarterly review'], { w: 1680, h: 164 }, style);
    expect(short).to.include({ size: 64, truncated: false });
    expect(short.paragraphs).to.deep.equal([['Quarterly review']]);
    // A title too wide at 64 px but not at 50 px shrinks onto one line.
    const n = [...Array(40).keys()]
      .map((i) => 30 + i)
      .find((k) => measure(textOf(k), 64, 700) > 1700 && measure(textOf(k), 50, 700) < 1600)!;
    const medium = fitBlock([textOf(n)], { w: 1680, h: 164 }, style);
    expect(medium.size).to.be.below(64).and.at.least(50);
    expect(medium.paragraphs[0]).to.have.length(1);
    const long = fitBlock([textOf(300)], { w: 1680, h: 164 }, style);
    expect(long.size).to.equal(36);
    expect(long.truncated).to.equal(true);
    expect(long.paragraphs[0]!.at(-1)).to.match(/…$/);
    expect(long.height).to.be.at.most(164);
  });

  it('when long slides are rasterised, then nothing is drawn outside the text boxes', async () => {
    const cases: [OutlineItem, number][] = [
      [{ title: textOf(300), bullets: [textOf(300, 3)] }, 0],
      [{ title: textOf(300), bullets: Array.from({ length: 12 }, (_, i) => textOf(300, i)) }, 1],
      [{ title: textOf(120), bullets: Array.from({ length: 9 }, (_, i) => textOf(60, i)) }, 2],
      [{ title: textOf(200), bullets: [`"${textOf(300)}"`, textOf(120)] }, 3],
      [{ title: textOf(40), bullets: [`We closed $4.2M ${textOf(200)}`, textOf(300, 2)] }, 4],
      // Characters Inter lacks (measured in DejaVu, or as a full em when no font here has them).
      [
        {
          title: '🚀 Launch 漢字漢字 ﷺ e\u0301 👩‍👩‍👧 '.repeat(6),
          bullets: ['Ǆemo 🚀🚀🚀 漢字漢字漢字 Ωμέγα Привет '.repeat(8)],
        },
        5,
      ],
    ];
    for (const [slide, index] of cases) {
      const c = composeSlide(input(slide, index, { deckName: textOf(300, 1) }));
      const ink = await inkByBoxes(c);
      expect(ink.inside, `${c.kind} slide`).to.be.above(10_000);
      expect(ink.outside, `${c.kind} slide`).to.equal(0);
    }
  });

  it('when a slide is rendered, then it is a 1920x1080 PNG stamped with the renderer and title, the same bytes every time', async () => {
    const slide = { title: 'Revenue', bullets: ['We closed $4.2M in new bookings', 'Win rate rose to 31%'] };
    const a = await renderSlide(input(slide));
    const b = await renderSlide(input(slide));
    expect(a.png.equals(b.png)).to.equal(true);
    const img = await decodeImage(a.png);
    expect(img).to.include({ format: 'png', width: 1920, height: 1080 });
    expect(img.text).to.deep.equal({ Software: SLIDE_RENDERER, Title: 'Revenue' });
  });

  it('when a PNG is stamped with text outside Latin-1, NUL or an over-long keyword, then its tEXt chunks hold printable Latin-1 with ? in their place, and a blank keyword is refused', async () => {
    const img = { width: 2, height: 1, channels: 3 as const, data: Buffer.alloc(6) };
    const text = {
      'Ti\0tle  x': 'café Ωμέγα 🚀 e\u0301\0end\nline 2\u0007',
      ['K'.repeat(100)]: 'long',
      ' Software ': 'v2',
    };
    const png = await encodePng(img, { text });
    expect((await decodeImage(png)).text).to.deep.equal({
      'Ti?tle x': 'café ????? ? é?end\nline 2?',
      ['K'.repeat(79)]: 'long',
      Software: 'v2',
    });
    await encodePng(img, { text: { '   ': 'x' } }).then(
      () => expect.fail('a keyword with no printable character was written'),
      (err: Error) => expect(err.message).to.match(/keyword/),
    );
    const slide = await decodeImage((await renderSlide(input({ title: 'Ωμέγα café 🚀', bullets: ['One'] }))).png);
    expect(slide.text).to.deep.equal({ Software: SLIDE_RENDERER, Title: '????? café ?' });
  });

  it('when text holds markup, quotes and control characters, then it is escaped and the slide still renders', async () => {
    const slide = {
      title: '<script>alert("x")</script> & Co\u0001',
      bullets: ['a < b && c > d', 'it\'s "quoted"\u0000'],
    };
    const c = composeSlide(input(slide));
    expect(c.svg).to.not.include('<script>');
    expect(c.svg).to.include('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; Co');
    const img = await decodeImage((await renderSlide(input(slide))).png);
    expect(img.width).to.equal(1920);
  });

  it('when outline items differ in shape, then the layout follows them', () => {
    expect(chooseLayout({ title: 'Deck', bullets: ['Subtitle'] }, 0)).to.equal('title');
    expect(chooseLayout({ title: 'Pricing', bullets: [] }, 3)).to.equal('section');
    expect(chooseLayout({ title: 'Agenda', bullets: ['Revenue'] }, 1)).to.equal('section');
    expect(
      chooseLayout(
        { title: 'Voice of the customer', bullets: ['"Onboarding took a day, not a month."', '— CFO, Northwind'] },
        2,
      ),
    ).to.equal('quote');
    expect(chooseLayout({ title: 'Revenue', bullets: ['Bookings grew 40% in Q2'] }, 2)).to.equal('big-number');
    expect(chooseLayout({ title: 'Revenue', bullets: ['Bookings grew in Q2', 'Three new logos'] }, 2)).to.equal(
      'bullets',
    );
    expect(
      chooseLayout({ title: 'Markets', bullets: ['Germany', 'France', 'Spain', 'Italy', 'Nordics', 'Benelux'] }, 2),
    ).to.equal('two-columns');
  });

  it('when a brand theme is given, then its accent colour paints the slide accents', async () => {
    const theme = {
      id: 'brand:acme.example',
      source: 'brand' as const,
      background: '#fdf3ed',
      surface: '#ffffff',
      text: '#2a1a12',
      accent: '#e8590c',
    };
    const img = await decodeImage(
      (await renderSlide(input({ title: 'Plan', bullets: ['One step', 'Another step'] }, 1, { theme }))).png,
    );
    const o = (130 * img.width + 84) * img.channels;
    expect([...img.data.subarray(o, o + 3)]).to.deep.equal([0xe8, 0x59, 0x0c]);
  });

  it('when the deck is in content mode, then the background carries no text and the layout lists the fitted boxes', () => {
    const c = composeSlide(input({ title: 'Body', bullets: ['Three'] }, 1, { mode: 'content' }));
    expect(c.svg).to.not.include('<text');
    expect(c.layout?.elements.map((e) => e.id)).to.deep.equal(['title', 'bullets']);
    expect(c.layout?.elements[1]).to.include({ type: 'list', fontSize: 40 });
  });
});
