/** One measured figure. `ratio` = value / baseline when a baseline ran in the same run. */
export interface BenchRow {
  name: string;
  value: number;
  unit: string;
  baseline?: number;
  ratio?: number;
  /** The ratio an issue asks for: at least (throughput), or at most when `better` is 'lower' (times). */
  target?: number;
  /** 'lower' for times and sizes: the target is a ceiling. */
  better?: 'lower';
  note?: string;
}

/** A benchmark module: `scripts/bench/<name>.bench.ts` exporting `bench`. */
export interface Bench {
  name: string;
  run(): Promise<BenchRow[]>;
}

export const row = (
  name: string,
  value: number,
  unit: string,
  baseline?: number,
  note?: string,
  target?: number,
): BenchRow => ({
  name,
  value: Math.round(value * 100) / 100,
  unit,
  ...(baseline !== undefined
    ? { baseline: Math.round(baseline * 100) / 100, ratio: Math.round((value / baseline) * 1000) / 1000 }
    : {}),
  ...(target !== undefined ? { target } : {}),
  ...(note ? { note } : {}),
});
