import type { Config } from '../infra/config';
import { hmacSign, signatureMatches } from '../infra/signing';

type LinkConfig = Pick<Config, 'PUBLIC_BASE_URL' | 'ASSET_SIGNING_SECRET' | 'DRIVE_LINK_TTL_SECONDS'>;

/** The public signed stream, relative to the API base (mounted before authentication). */
export const DRIVE_DOWNLOAD_PATH = '/drive/downloads';

/**
 * The message a Drive download link signs. WARNING: changing it invalidates every live link
 * (they live DRIVE_LINK_TTL_SECONDS, so only for that long).
 */
const message = (fileId: string, keyId: string, exp: number) => `drive-download\n${fileId}\n${keyId}\n${exp}`;

/**
 * A signed, time-limited link to the raw bytes of a Drive file (SPEC 2.19 downloadUrl, the
 * target of GET /drive/files/{id}/content): absolute, fetched with a plain GET and no headers.
 * It names the file, the API key that asked for it and the expiry (unix seconds), signed with
 * HMAC-SHA256(ASSET_SIGNING_SECRET). The stream re-checks the key and the file on every fetch.
 *
 *   {PUBLIC_BASE_URL}/api/v1/drive/downloads/{fileId}?key={keyId}&exp={unixSeconds}&sig={base64url}
 */
export function driveDownloadLink(
  config: LinkConfig,
  input: { fileId: string; keyId: string; now?: Date },
): { url: string; expiresAt: Date } {
  const now = input.now ?? new Date();
  const exp = Math.floor(now.getTime() / 1000) + config.DRIVE_LINK_TTL_SECONDS;
  const sig = hmacSign(config.ASSET_SIGNING_SECRET, message(input.fileId, input.keyId, exp));
  const q = new URLSearchParams({ key: input.keyId, exp: String(exp), sig });
  return {
    url: `${config.PUBLIC_BASE_URL}/api/v1${DRIVE_DOWNLOAD_PATH}/${encodeURIComponent(input.fileId)}?${q}`,
    expiresAt: new Date(exp * 1000),
  };
}

/**
 * Checks a presented link: `invalid` when a part is missing or malformed or the signature does
 * not match (constant-time comparison), `expired` when it is authentic but past its expiry.
 * Says nothing about the key or the file: the stream checks those on every fetch.
 */
export function verifyDriveDownloadLink(
  config: Pick<Config, 'ASSET_SIGNING_SECRET'>,
  input: { fileId: string; keyId: string | undefined; exp: string | undefined; sig: string | undefined; now?: Date },
): 'ok' | 'expired' | 'invalid' {
  const { fileId, keyId, exp, sig } = input;
  if (!keyId || !exp || !sig || !/^\d{1,12}$/.test(exp) || keyId.length > 64) return 'invalid';
  if (!signatureMatches(hmacSign(config.ASSET_SIGNING_SECRET, message(fileId, keyId, Number(exp))), sig))
    return 'invalid';
  return Number(exp) * 1000 <= (input.now ?? new Date()).getTime() ? 'expired' : 'ok';
}
