/**
 * Slides benchmark, in this process: slides rendered per second by the slide renderer
 * (outline item → PNG bytes), the new one (SVG with Inter measured by fontkit, rasterised by
 * librsvg inside sharp, 1920x1080) against the bitmap renderer it replaced (5×7 bitmap font and the
 * hand-written PNG encoder, 960x540), kept in scripts/bench/baselines/ and run in the same process
 * on the same deck. Each side renders the deck in rounds, alternating, and the best round counts,
 * which keeps the ratio fair on a shared machine.
 */
import type { OutlineItem } from '../../contracts/presentations';
import { renderSlide } from '../../workers/presentations/render';
import { THEMES } from '../../workers/presentations/theme';
import { authorLocally } from '../../workers/engines/presentations/local.engine';
import { row, type Bench, type BenchRow } from './bench';
import { renderSlide as renderSlideBefore } from './baselines/slide-render';

const ROUNDS = Number(process.env.BENCH_SLIDE_ROUNDS ?? 3);

/** A realistic deck: a sales brief through the local outline author, plus a quote and a crowded slide. */
export const BENCH_BRIEF =
  'Q3 sales review for the EMEA team. We closed $4.2M in new bookings, 18% above plan. Win rate rose to 31% after the pricing change in July. ' +
  'Enterprise deals now average $120k, up from $85k. Net revenue retention reached 112%. Churn fell to 2.1% as onboarding moved to a dedicated team. ' +
  'Three logos churned over missing SSO support. Germany and France drove 60% of new pipeline. We signed our first reseller partnership in the Nordics. ' +
  'The sales team grew from 14 to 19 reps. Ramp time for new reps dropped to 4 months. Discounting above 20% now needs VP approval. ' +
  'Risks: the Q4 pipeline depends on two deals above $500k. A competitor cut prices by 15% in the UK. ' +
  'Next quarter we will launch the partner portal and hire two solution engineers.';

function deck(): OutlineItem[] {
  return [
    ...authorLocally({
      name: 'Quarterly review',
      brief: BENCH_BRIEF,
      slideCount: 8,
      companyName: 'Acme',
      visualStyle: 'illustration',
    }),
    {
      title: 'What customers say',
      bullets: [
        '"The onboarding was the smoothest we have had with any vendor this year."',
        '— Head of Sales Ops, Northwind',
      ],
    },
    {
      title: 'A long title that has to shrink and wrap before it fits the box at the top of the slide',
      bullets: Array.from(
        { length: 10 },
        (_, i) => `Point ${i + 1}: ${'a reasonably long bullet that wraps onto a second line '.repeat(2)}`,
      ),
    },
  ];
}

async function perSecond(
  render: (slide: OutlineItem, index: number, total: number) => Promise<unknown> | unknown,
  slides: OutlineItem[],
) {
  const t0 = performance.now();
  for (const [i, s] of slides.entries()) await render(s, i, slides.length);
  return slides.length / ((performance.now() - t0) / 1000);
}

export const bench: Bench = {
  name: 'slides (renderer: SVG + Inter + sharp vs the bitmap renderer it replaced)',
  async run(): Promise<BenchRow[]> {
    const slides = deck();
    const common = {
      deckName: 'Quarterly review',
      companyName: 'Acme',
      theme: THEMES.default!,
      visualStyle: 'illustration',
      mode: 'creator' as const,
    };
    const before = (slide: OutlineItem, index: number, total: number) =>
      renderSlideBefore({ slide, index, total, ...common });
    const after = (slide: OutlineItem, index: number, total: number) => renderSlide({ slide, index, total, ...common });
    await perSecond(before, slides.slice(0, 2));
    await perSecond(after, slides.slice(0, 2));
    let old = 0;
    let now = 0;
    for (let r = 0; r < ROUNDS; r++) {
      old = Math.max(old, await perSecond(before, slides));
      now = Math.max(now, await perSecond(after, slides));
    }
    return [
      row(
        'slides/s, bitmap renderer it replaced (960x540)',
        old,
        'slides/s',
        undefined,
        `${slides.length}-slide deck, best of ${ROUNDS} rounds`,
      ),
      row(
        'slides/s, SVG renderer (1920x1080, Inter, sharp)',
        now,
        'slides/s',
        old,
        `baseline = the bitmap renderer it replaced, in the same run; ${slides.length}-slide deck, best of ${ROUNDS} rounds`,
        0.5,
      ),
    ];
  },
};
