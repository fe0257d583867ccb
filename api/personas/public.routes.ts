import { Router } from 'express';
import { AppError } from '../../platform/infra/errors';
import { faceById, faceSvg } from '../../platform/personas/faces';
import { EMBED_SCRIPT_PATH } from '../../platform/personas/personas.service';
import { EMBED_SCRIPT } from './embed';

/**
 * What persona pages load without a key, mounted before authentication: the built-in face
 * pictures (the same for everyone, nothing private) and the web embed script.
 */
export function personasPublicRoutes() {
  const r = Router();
  r.get('/persona-faces/:file', (req, res) => {
    const m = /^([a-z0-9-]{1,64})\.svg$/.exec(req.params.file);
    const face = m ? faceById(m[1]!) : undefined;
    if (!face) throw new AppError('not_found', 'face not found');
    res.setHeader('Content-Type', 'image/svg+xml; charset=utf-8');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    // An SVG opened directly runs no script and loads nothing.
    res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
    res.setHeader('Cache-Control', 'public, max-age=86400');
    res.send(faceSvg(face));
  });
  r.get(EMBED_SCRIPT_PATH, (_req, res) => {
    res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Cache-Control', 'public, max-age=3600');
    res.send(EMBED_SCRIPT);
  });
  return r;
}
