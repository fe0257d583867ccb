import { runMain } from '../platform/infra/main';
import { start } from './workers';

runMain('workers', start);
