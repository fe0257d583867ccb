import { expect } from 'chai';
import { OutlineItem } from '../../contracts/presentations';
import {
  authorLocally,
  briefSentences,
  createLocalDeckEngine,
  outlineLocally,
} from '../../workers/engines/presentations/local.engine';

const SALES_BRIEF = `Q3 sales review for the EMEA team.
We closed $4.2M in new bookings, 18% above plan. Win rate rose to 31% after the pricing change in July.
Enterprise deals now average $120k, up from $85k. Net revenue retention reached 112%.
Churn fell to 2.1% as onboarding moved to a dedicated team. Three logos churned over missing SSO support.
Germany and France drove 60% of new pipeline. We signed our first reseller partnership in the Nordics.
The sales team grew from 14 to 19 reps. Ramp time for new reps dropped to 4 months.
Discounting above 20% now needs VP approval.
Risks: the Q4 pipeline depends on two deals above $500k. A competitor cut prices by 15% in the UK.
Next quarter we will launch the partner portal and hire two solution engineers.`;

const author = (over: Partial<Parameters<typeof authorLocally>[0]> = {}) =>
  authorLocally({
    name: 'Quarterly review',
    brief: SALES_BRIEF,
    slideCount: 8,
    companyName: 'Acme',
    visualStyle: 'illustration',
    ...over,
  });
/** `n` sentences cycling through topics, figures and sentences of no known topic, with one very long word. */
function briefOf(n: number): string {
  const kinds = [
    (i: number) => `Revenue in region ${i} grew ${i + 3}% on new bookings`,
    (i: number) => `Lighthouse number ${i} shines over harbour ${i} at dusk`,
    (i: number) => `Churn among customers of cohort ${i} fell to ${i}%`,
    (i: number) => `Orchard ${i} yields apples and pears ${'x'.repeat(i % 7 === 3 ? 280 : 3)}`,
    (i: number) => `Risks: supplier ${i} may delay parts`,
    (i: number) => `Violin maker ${i} carves spruce tops by hand`,
  ];
  return Array.from({ length: n }, (_, i) => `${kinds[i % kinds.length]!(i)}.`).join(' ');
}

const norm = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, ' ')
    .trim();
const allLines = (deck: OutlineItem[]) => deck.flatMap((s) => s.bullets);
/** A sentence compared by its first 100 characters: one past 300 characters is shown clipped. */
const key = (s: string) => norm(s).slice(0, 100);

describe('slides: the local outline engine (local-outline-v2)', () => {
  it('when a realistic sales brief is outlined, then it has a title slide, an agenda of the section titles, the sections and a summary', () => {
    const deck = author();
    expect(deck).to.have.length(8);
    expect(deck[0]).to.deep.equal({
      title: 'Quarterly review',
      bullets: ['Q3 sales review for the EMEA team', 'Presented by Acme'],
    });
    expect(deck[1]!.title).to.equal('Agenda');
    const sections = deck.slice(2, -1);
    expect(deck[1]!.bullets).to.deep.equal(sections.map((s) => s.title));
    expect(deck.at(-1)!.title).to.equal('Summary');
    expect(deck.at(-1)!.bullets).to.have.length(sections.length);
    expect(deck.at(-1)!.bullets[0]).to.match(/^Revenue: \$4\.2M/);
    expect(new Set(deck.map((s) => s.title)).size).to.equal(deck.length);
  });

  it('when a brief is outlined, then every sentence of it appears exactly once and no sentence is repeated across slides', () => {
    const deck = author();
    const lines = allLines(deck).map(norm);
    expect(new Set(lines).size).to.equal(lines.length);
    for (const sentence of briefSentences(SALES_BRIEF))
      expect(
        lines.filter((l) => l === norm(sentence)),
        sentence,
      ).to.have.length(1);
  });

  it('when the deck has a name, then no bullet is filler built from it', () => {
    for (const slideCount of [3, 5, 8, 12, 30]) {
      const deck = author({ slideCount, name: 'Quarterly review' });
      for (const b of allLines(deck)) {
        expect(b.toLowerCase(), b).to.not.include('quarterly review');
        expect(b).to.not.match(/^(What .* means for|Where .* stands today|Next steps on)/);
      }
      expect(deck.length).to.be.at.most(slideCount);
    }
  });

  it('when the brief is short, then the deck has fewer slides with real bullets rather than filler', () => {
    const deck = author({ brief: 'We grew revenue 40% in Q2. Churn fell to 3%.', slideCount: 8 });
    expect(deck.map((s) => s.title)).to.deep.equal(['Quarterly review', 'Agenda', 'Revenue', 'Customers', 'Summary']);
    expect(deck[2]!.bullets).to.deep.equal(['We grew revenue 40% in Q2']);
    expect(deck[3]!.bullets).to.deep.equal(['Churn fell to 3%']);
    expect(deck[4]!.bullets).to.deep.equal(['Revenue: 40%', 'Customers: 3%']);
    expect(deck[0]!.bullets).to.deep.equal(['Presented by Acme']);
  });

  it('when the slide count is small, then sections merge rather than sentences being dropped', () => {
    const deck = author({ slideCount: 4 });
    expect(deck).to.have.length(4);
    expect(deck.map((s) => s.title)[0]).to.equal('Quarterly review');
    expect(deck.at(-1)!.title).to.equal('Summary');
    expect(allLines(deck.slice(1, -1)).length).to.equal(briefSentences(SALES_BRIEF).length - 1);
  });

  it('when the brief repeats itself or lists with markers, then each fact is used once, without its marker', () => {
    const deck = author({
      brief: '- Churn fell to 3%.\n- Churn fell to 3%.\n* Revenue grew 40%.\n1. Hiring starts in May.',
      slideCount: 5,
    });
    const lines = allLines(deck);
    expect(lines.filter((l) => l === 'Churn fell to 3%')).to.have.length(1);
    expect(lines).to.include.members(['Revenue grew 40%', 'Hiring starts in May']);
  });

  it('when any slide count from 3 to 30 is asked of briefs of 0 to 60 sentences under a 255-character name, then every item is a valid outline item', () => {
    const names = ['Quarterly review', `${'Board update '.repeat(20)}`.slice(0, 255), 'N'.repeat(255)];
    for (const slideCount of [...Array(28).keys()].map((i) => i + 3)) {
      for (const sentences of [0, 1, 2, 5, 13, 30, 60]) {
        for (const name of names) {
          const brief = briefOf(sentences);
          const { items: deck, leftOut } = outlineLocally({
            name,
            brief,
            slideCount,
            companyName: 'Acme',
            visualStyle: 'illustration',
          });
          expect(deck.length, `${slideCount} slides, ${sentences} sentences`).to.be.within(1, slideCount);
          const shown = new Set(allLines(deck).map(key));
          expect(
            briefSentences(brief).filter((s) => !shown.has(key(s))),
            `${slideCount} slides, ${sentences} sentences`,
          ).to.have.length(leftOut);
          for (const item of deck)
            expect(
              OutlineItem.safeParse(item).error?.issues,
              `${slideCount} slides, ${sentences} sentences: ${item.title.slice(0, 40)}`,
            ).to.equal(undefined);
        }
      }
    }
  });

  it('when the deck name is longer than a slide title may be, then the title slide shows it clipped with an ellipsis', () => {
    const name = `${'Board update '.repeat(20)}`.slice(0, 255).trim();
    const title = author({ name })[0]!.title;
    expect(title.length).to.be.at.most(200);
    expect(title).to.match(/^Board update Board update .*…$/);
  });

  it('when a brief has more sections than an agenda can list, then the agenda and summary name each section before it was split', () => {
    const deck = author({ brief: briefOf(60), slideCount: 30 });
    const agenda = deck.find((s) => s.title === 'Agenda')!;
    const body = deck.slice(2, -1);
    expect(body.length).to.be.above(12);
    expect(agenda.bullets.length).to.be.within(2, 12);
    for (const s of body)
      expect(
        agenda.bullets.some((a) => s.title === a || s.title.startsWith(`${a}: `) || s.title === `${a}, continued`),
        s.title,
      ).to.equal(true);
    expect(deck.at(-1)!.bullets).to.have.length(agenda.bullets.length);
  });

  it('when a long brief meets a small slide count, then each body slide holds up to 12 sentences and the rest are counted as left out', () => {
    const brief = briefOf(30);
    const { items, leftOut } = outlineLocally({
      name: 'Quarterly review',
      brief,
      slideCount: 3,
      companyName: null,
      visualStyle: 'illustration',
    });
    expect(items.map((s) => s.bullets.length)).to.deep.equal([1, 12, 1]);
    expect(leftOut).to.equal(30 - 1 - 12);
    const shown = new Set(allLines(items.slice(0, -1)).map(key));
    expect(briefSentences(brief).filter((s) => !shown.has(key(s)))).to.have.length(leftOut);
    // Three body slides hold 36 bullets: the 29 sentences after the subtitle all fit, however the topics fall.
    const whole = outlineLocally({
      name: 'Quarterly review',
      brief,
      slideCount: 6,
      companyName: null,
      visualStyle: 'illustration',
    });
    expect(whole.leftOut).to.equal(0);
    expect(allLines(whole.items.slice(2, -1))).to.have.length(29);
  });

  it('when sentences are left out, then the engine notes how many; when none are, then it notes nothing', async () => {
    const ctx = { signal: new AbortController().signal, progress: async () => {} };
    const input = {
      name: 'Quarterly review',
      brief: briefOf(30),
      slideCount: 3,
      companyName: null,
      visualStyle: 'illustration',
    };
    expect((await createLocalDeckEngine().authorOutline(input, ctx)).notes).to.deep.equal([
      'outline: 17 sentences of the brief were left out (a slide holds at most 12 bullets); ask for more slides to include them',
    ]);
    expect((await createLocalDeckEngine().authorOutline({ ...input, slideCount: 8 }, ctx)).notes).to.deep.equal([]);
  });
});
