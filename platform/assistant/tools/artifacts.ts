import type { ChatArtifact } from '../../../contracts/conversations';
import { openUrlOf, PROJECT_TYPE_OF_KIND, type ProjectKind } from '../../../contracts/projects';
import { pollPath } from '../../jobs/jobs';

/** SPEC 2.7 artifacts of what the tools make. */

/** A project-backed artifact: projectId, projectType of its kind, absolute editor link. */
export function projectArtifact(input: {
  type: ChatArtifact['type'];
  title: string;
  kind: ProjectKind;
  projectId: string;
  publicBaseUrl: string;
  data?: Record<string, unknown>;
}): ChatArtifact {
  return {
    type: input.type,
    title: input.title,
    projectId: input.projectId,
    projectType: PROJECT_TYPE_OF_KIND[input.kind],
    openUrl: openUrlOf(input.publicBaseUrl, input.kind, input.projectId),
    ...(input.data ? { data: input.data } : {}),
  };
}

/** What async media carry (SPEC 2.7): the type-prefixed job id and its poll path. */
export const jobData = (jobId: string, extra: Record<string, unknown> = {}) => ({
  apiJobId: jobId,
  pollUrl: pollPath(jobId),
  ...extra,
});

/** A one-line title of at most `max` characters, from free text. */
export function titleFrom(text: string, max = 80): string {
  const one = text
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/[.!?]+$/, '');
  const cut = one.length > max ? `${one.slice(0, max - 1).replace(/\s+\S*$/, '')}…` : one;
  return cut.charAt(0).toUpperCase() + cut.slice(1) || 'Untitled';
}
