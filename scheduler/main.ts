import { runMain } from '../platform/main';
import { start } from './scheduler';

runMain('scheduler', start);
