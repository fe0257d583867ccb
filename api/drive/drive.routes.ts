import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { driveCallerOf } from '../../platform/drive/access';
import type { Runtime } from '../../platform/runtime';
import type { AuthContext } from '../http/context';
import { mount, type RouteDeps } from '../http/route';
import { createDriveService, type DriveActor } from '../../platform/drive/drive.service';
import { createFoldersService } from '../../platform/drive/folders.service';

/** The Drive caller of a request: account, key, pins, plan. */
export const driveActorOf = (auth: AuthContext): DriveActor => ({
  caller: driveCallerOf(auth.key),
  accountName: auth.account.name,
  plan: auth.account.plan,
});

/** Routes of Drive files, folders, bulk operations and team drives (SPEC 4.10). */
export function driveRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const files = createDriveService(rt);
  const folders = createFoldersService(rt);
  mount(r, endpoints.listDriveFiles, ({ auth, query }) => files.list(driveActorOf(auth), query), deps);
  mount(r, endpoints.createDriveFile, ({ auth, body }) => files.create(driveActorOf(auth), body), deps);
  // Before /drive/files/{id}: "bulk" is a well-formed id too, but this is a POST, {id} has no POST.
  mount(r, endpoints.bulkDriveFiles, ({ auth, body }) => files.bulk(driveActorOf(auth), body), deps);
  mount(r, endpoints.getDriveFile, ({ auth, params }) => files.get(driveActorOf(auth), params.id!), deps);
  mount(
    r,
    endpoints.updateDriveFile,
    ({ auth, params, body, ifMatch }) => files.update(driveActorOf(auth), params.id!, body, ifMatch),
    deps,
  );
  mount(r, endpoints.listDriveFolders, ({ auth, query }) => folders.tree(driveActorOf(auth), query), deps);
  mount(r, endpoints.createDriveFolder, ({ auth, body }) => folders.create(driveActorOf(auth), body), deps);
  mount(
    r,
    endpoints.updateDriveFolder,
    ({ auth, params, body, ifMatch }) => folders.update(driveActorOf(auth), params.id!, body, ifMatch),
    deps,
  );
  return r;
}
