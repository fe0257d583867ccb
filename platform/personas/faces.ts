/**
 * The built-in persona faces (GET /personas/faces). Each is drawn here as a small SVG, served
 * without a key at /api/v1/persona-faces/{id}.svg: faces are the same for every account and
 * hold nothing private. WARNING: ids are persisted on personas; add faces, never rename one.
 */
export interface FaceDef {
  id: string;
  name: string;
  description: string;
  skin: string;
  hair: string;
  background: string;
  eyes: 'round' | 'happy' | 'visor' | 'sleepy';
  mouth: 'smile' | 'grin' | 'flat' | 'o';
  hairStyle: 'short' | 'long' | 'bun' | 'none' | 'antenna';
}

export const FACES: readonly FaceDef[] = [
  {
    id: 'aurora',
    name: 'Aurora',
    description: 'Warm and friendly, long auburn hair.',
    skin: '#f2c9a0',
    hair: '#8b3a1e',
    background: '#fde68a',
    eyes: 'round',
    mouth: 'smile',
    hairStyle: 'long',
  },
  {
    id: 'basil',
    name: 'Basil',
    description: 'Calm and precise, short dark hair.',
    skin: '#c68642',
    hair: '#1f2937',
    background: '#bbf7d0',
    eyes: 'round',
    mouth: 'flat',
    hairStyle: 'short',
  },
  {
    id: 'cleo',
    name: 'Cleo',
    description: 'Cheerful, with a top bun.',
    skin: '#8d5524',
    hair: '#111827',
    background: '#fbcfe8',
    eyes: 'happy',
    mouth: 'grin',
    hairStyle: 'bun',
  },
  {
    id: 'dex',
    name: 'Dex',
    description: 'A friendly robot with a visor.',
    skin: '#cbd5e1',
    hair: '#64748b',
    background: '#bfdbfe',
    eyes: 'visor',
    mouth: 'flat',
    hairStyle: 'antenna',
  },
  {
    id: 'elio',
    name: 'Elio',
    description: 'Relaxed and thoughtful, no hair.',
    skin: '#e0ac69',
    hair: '#e0ac69',
    background: '#ddd6fe',
    eyes: 'sleepy',
    mouth: 'smile',
    hairStyle: 'none',
  },
  {
    id: 'fern',
    name: 'Fern',
    description: 'Curious, always ready with a question.',
    skin: '#ffdbac',
    hair: '#d97706',
    background: '#a5f3fc',
    eyes: 'round',
    mouth: 'o',
    hairStyle: 'short',
  },
];

const byId = new Map(FACES.map((f) => [f.id, f]));
export const faceById = (id: string) => byId.get(id);

/** Path of a face's picture under the API base path (public, no key). */
export const facePreviewPath = (id: string) => `/persona-faces/${id}.svg`;

function eyes(f: FaceDef): string {
  switch (f.eyes) {
    case 'visor':
      return '<rect x="58" y="86" width="84" height="22" rx="11" fill="#0f172a"/><rect x="70" y="93" width="60" height="8" rx="4" fill="#38bdf8"/>';
    case 'happy':
      return '<path d="M70 98 q8 -10 16 0" stroke="#111827" stroke-width="4" fill="none"/><path d="M114 98 q8 -10 16 0" stroke="#111827" stroke-width="4" fill="none"/>';
    case 'sleepy':
      return '<path d="M70 96 h16" stroke="#111827" stroke-width="4"/><path d="M114 96 h16" stroke="#111827" stroke-width="4"/>';
    default:
      return '<circle cx="78" cy="96" r="7" fill="#111827"/><circle cx="122" cy="96" r="7" fill="#111827"/>';
  }
}

function mouth(f: FaceDef): string {
  switch (f.mouth) {
    case 'grin':
      return '<path d="M76 126 q24 24 48 0 z" fill="#7f1d1d"/>';
    case 'flat':
      return '<path d="M82 132 h36" stroke="#7f1d1d" stroke-width="4" stroke-linecap="round"/>';
    case 'o':
      return '<circle cx="100" cy="132" r="7" fill="#7f1d1d"/>';
    default:
      return '<path d="M78 126 q22 18 44 0" stroke="#7f1d1d" stroke-width="4" fill="none" stroke-linecap="round"/>';
  }
}

function hair(f: FaceDef): { back: string; front: string } {
  switch (f.hairStyle) {
    case 'long':
      return {
        back: `<rect x="42" y="60" width="116" height="120" rx="50" fill="${f.hair}"/>`,
        front: `<path d="M48 92 q52 -70 104 0 q-20 -28 -52 -30 q-32 2 -52 30z" fill="${f.hair}"/>`,
      };
    case 'bun':
      return {
        back: `<circle cx="100" cy="34" r="20" fill="${f.hair}"/>`,
        front: `<path d="M50 88 q50 -64 100 0 q-50 -30 -100 0z" fill="${f.hair}"/>`,
      };
    case 'antenna':
      return {
        back: '',
        front: `<line x1="100" y1="46" x2="100" y2="22" stroke="${f.hair}" stroke-width="4"/><circle cx="100" cy="20" r="7" fill="#ef4444"/>`,
      };
    case 'none':
      return { back: '', front: '' };
    default:
      return { back: '', front: `<path d="M50 84 q50 -56 100 0 q-50 -22 -100 0z" fill="${f.hair}"/>` };
  }
}

/** A 200×200 SVG of the face: background, head, hair, eyes, mouth. */
export function faceSvg(f: FaceDef): string {
  const h = hair(f);
  const head =
    f.hairStyle === 'antenna'
      ? `<rect x="50" y="46" width="100" height="110" rx="18" fill="${f.skin}"/>`
      : `<ellipse cx="100" cy="104" rx="52" ry="60" fill="${f.skin}"/>`;
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="200" height="200" viewBox="0 0 200 200" role="img" aria-label="${f.name}">` +
    `<title>${f.name}</title><rect width="200" height="200" rx="24" fill="${f.background}"/>${h.back}${head}${h.front}${eyes(f)}${mouth(f)}</svg>`
  );
}
