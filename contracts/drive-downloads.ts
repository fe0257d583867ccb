import { z } from 'zod';

/**
 * Drive download links (SPEC 2.19 downloadUrl, 4.10 GET /drive/files/{id}/content, 5.5): the
 * redirect's body, and the rules of the public signed stream it points to.
 */

/** How the public stream answers. WARNING: public contract (codes and statuses). */
export const DRIVE_DOWNLOAD_RULES =
  'The link is GET {base_url}/drive/downloads/{fileId}?key=&exp=&sig= (absolute, valid DRIVE_LINK_TTL_SECONDS, default 900 s; no Authorization header). ' +
  'Every fetch re-checks: the signature (403 link_invalid), the expiry (410 link_expired), the key that asked for the link is still active with drive:read (410 link_revoked), ' +
  'and the file still exists, is not trashed and is inside the key folder pins (404 not_found). ' +
  'It answers 200 with the bytes, or 206 with Content-Range for one bytes range (416 range_not_satisfiable with Content-Range: bytes */size for a bad one), ' +
  'with the stored Content-Type, Content-Length, Accept-Ranges: bytes, Content-Disposition: attachment with the file name (RFC 6266 / 5987 filename*), Cache-Control: no-store. HEAD works too.';

/** The body of the 302 of GET /drive/files/{id}/content (Location holds the same URL). */
export const DriveDownloadLink = z
  .object({
    downloadUrl: z.string().describe('The signed link, the same as the Location header.'),
    downloadExpiresAt: z.string().describe('When the link stops working (ISO 8601).'),
  })
  .meta({ id: 'DriveDownloadLink' });
export type DriveDownloadLink = z.infer<typeof DriveDownloadLink>;
