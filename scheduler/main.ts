import { runMain } from '../platform/infra/main';
import { start } from './scheduler';

runMain('scheduler', start);
