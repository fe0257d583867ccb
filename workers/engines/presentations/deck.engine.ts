/** What an outline author receives. */
export interface OutlineInput {
  name: string;
  brief: string;
  slideCount: number;
  companyName: string | null;
  visualStyle: string;
}

/**
 * What an author returns: the items as written (`unknown`, checked by the deck pool) and notes
 * for the deck's result, e.g. how much of the brief did not fit.
 */
export interface AuthoredOutline {
  items: unknown[];
  notes: string[];
}

/**
 * A deck engine authors the outline from the brief. Items are returned as the author wrote them
 * (`unknown`): the deck pool checks each one, and an item without a title or bullets becomes a
 * failed slide rather than failing the deck. Slides are always rendered locally (PNG).
 */
export interface DeckEngine {
  readonly name: string;
  /** True for an author that runs without a model (the result's notes say so). */
  readonly offline?: boolean;
  authorOutline(
    input: OutlineInput,
    ctx: { signal: AbortSignal; progress(raw: string, msg: string): Promise<void> },
  ): Promise<AuthoredOutline>;
}
