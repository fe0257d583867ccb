import { generateKeyBetween, generateNKeysBetween } from 'fractional-indexing';

/**
 * Card order: fractional indexing.
 *
 * Every card carries `position`, a string order key (the `fractional-indexing` package, base 62:
 * `a0`, `a1`, `a0V`, …). Cards of a lane sort by position, then by id, comparing strings
 * byte by byte (MongoDB and FerretDB both do). Between any two keys there is always another, so
 * placing a card between two neighbours writes only that card: its new key is
 * `generateKeyBetween(previous.position, next.position)` (null at either end), and the other
 * cards keep theirs. Order stays dense with no renumbering.
 *
 * Concurrency: two moves into the same gap compute the same key. A unique index on
 * (board, lane, position) lets only one of them store it; the other gets a duplicate-key error,
 * reads its neighbours again (the winner is now one of them) and takes a key beside it. So keys
 * stay unique and the order total, and `id` as the second sort key keeps it stable even for data
 * written without the index. Appending to a lane keeps keys short (`a0`, `a1`, … `b00`); inserting
 * again and again into the same gap adds about one character per six inserts (a base-62 digit
 * halves the gap about six times). Duplicating a board gives every card a fresh, short key.
 */
export const keyBetween = (prev: string | null, next: string | null): string => generateKeyBetween(prev, next);

/** `n` fresh, evenly spread keys in ascending order (a duplicated lane). */
export const freshKeys = (n: number): string[] => generateNKeysBetween(null, null, n);

/** How many times a card write retries after losing its slot to a concurrent one. */
export const PLACE_RETRIES = 30;
