import {
  hits,
  queryTerms,
  sentenceKey,
  sentences,
  type ResearchEngine,
  type ResearchEngineOutput,
} from './research.engine';

const clip = (s: string, n = 280) => (s.length > n ? `${s.slice(0, n - 1).trimEnd()}…` : s);

/**
 * local-extractive-v1: an offline, deterministic report writer. From every source read it picks
 * the sentences that mention the query terms most (ties by position), cites them as [n], and
 * lays them out as a Markdown report: summary, findings per source, sources, and what could not
 * be read. It never invents text; every line comes from the workspace.
 */
export function createLocalResearchEngine(): ResearchEngine {
  return {
    name: 'local-extractive-v1',
    async write(input, ctx): Promise<ResearchEngineOutput> {
      await ctx.progress(
        'writing',
        `Writing the report from ${input.sources.length} source${input.sources.length === 1 ? '' : 's'}`,
      );
      const terms = queryTerms(input.query);
      const ranked = input.sources.map((s) => {
        const seen = new Set<string>();
        const unique = sentences(s.text).filter((t) => {
          const k = sentenceKey(t);
          if (seen.has(k)) return false;
          seen.add(k);
          return true;
        });
        const scored = unique
          .map((text, i) => ({ text, i, score: hits(text, terms) }))
          .sort((a, b) => b.score - a.score || a.i - b.i);
        return { source: s, top: scored.slice(0, 3).sort((a, b) => a.i - b.i), best: scored[0] };
      });
      const lines: string[] = [`# Research: ${input.query}`, ''];
      lines.push(
        `_Workspace research: ${input.sources.length} source${input.sources.length === 1 ? '' : 's'} read${input.unread.length ? `, ${input.unread.length} not readable` : ''}._`,
        '',
      );
      lines.push('## Summary', '');
      if (!input.sources.length) {
        lines.push(
          `Nothing in this workspace matches "${input.query}" yet. Create projects, notes or jobs about it and run the research again.`,
          '',
        );
      } else {
        // The strongest sentence of each source, once each across sources (citing every source that says it).
        const summary = new Map<string, { text: string; score: number; cites: number[] }>();
        for (const r of ranked) {
          if (!r.best || r.best.score <= 0) continue;
          const k = sentenceKey(r.best.text);
          const hit = summary.get(k);
          if (hit) hit.cites.push(r.source.n);
          else summary.set(k, { text: r.best.text, score: r.best.score, cites: [r.source.n] });
        }
        const best = [...summary.values()].sort((a, b) => b.score - a.score || a.cites[0]! - b.cites[0]!).slice(0, 5);
        if (best.length) for (const b of best) lines.push(`- ${clip(b.text)} ${b.cites.map((n) => `[${n}]`).join('')}`);
        else
          lines.push(
            `The workspace holds ${input.sources.length} related item${input.sources.length === 1 ? '' : 's'}; none states the query terms in a sentence, so the findings below quote their openings.`,
          );
        lines.push('', '## Findings', '');
        for (const r of ranked) {
          lines.push(`### [${r.source.n}] ${r.source.title}`, '', `_${r.source.kind}_`, '');
          const picked = r.top.length
            ? r.top
            : [{ text: clip(r.source.text.replace(/\s+/g, ' ').trim(), 200), i: 0, score: 0 }];
          for (const p of picked) if (p.text) lines.push(`- ${clip(p.text)} [${r.source.n}]`);
          lines.push('');
        }
        lines.push('## Sources', '');
        for (const s of input.sources) lines.push(`${s.n}. [${s.title}](${s.url}) (${s.domain})`);
        lines.push('');
      }
      if (input.unread.length) {
        lines.push('## Not read', '');
        for (const u of input.unread) lines.push(`- ${u.title}: ${u.reason}`);
        lines.push('');
      }
      return { content: lines.join('\n'), tokensUsed: null };
    },
  };
}
