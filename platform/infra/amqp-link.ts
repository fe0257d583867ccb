import { AsyncResource } from 'node:async_hooks';
import type { EventEmitter } from 'node:events';
import type { ChannelModel, ConsumeMessage } from 'amqplib';
import type { Logger } from './log';
import type { TopologyOptions } from './amqp-topology';

/**
 * What the parts of an AmqpClient (amqp.ts) share: the types of its deliveries and events, and
 * the live state of its connection that the publisher, the consumers, the broadcasts and the RPC
 * calls read (never write: connecting and failing over belong to the client).
 */
export interface AmqpLink {
  /** The connection in use, or undefined between connections. */
  readonly conn?: ChannelModel;
  /** Set once close() is called. */
  readonly closing: boolean;
  /** Why the broker blocks publishing on the connection (a memory or disk alarm), or undefined. */
  readonly blocked?: string;
  /** `host:port` of the node connected to, or undefined. */
  readonly node?: string;
  readonly topology: TopologyOptions;
  readonly log: Logger;
  readonly publishTimeoutMs: number;
  /** The client itself, where the parts emit their events. */
  readonly events: EventEmitter<AmqpEvents>;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The async context of no request and no job (this module's load): connection events and
 * reconnects run in it, so a failover's log lines, and every later line of the new connection,
 * do not name whichever job's publish happened to meet the dead socket.
 */
export const outsideWork = new AsyncResource('amqp-connection');

export interface Delivery {
  msg: ConsumeMessage;
  ack(): void;
  /** Back onto the queue (counts as a delivery for the quorum delivery limit). */
  requeue(): void;
  /** Off to the dead-letter queue, with no further delivery. */
  deadLetter(): void;
}

export interface AmqpEvents {
  connected: [];
  disconnected: [Error | undefined];
  published: [{ exchange: string; routingKey: string }];
  /** A publish sent again: its connection died before the confirm (failover), or the broker nacked it. */
  resent: [{ exchange: string; routingKey: string; reason: 'connection_lost' | 'nacked' }];
  /** A consumer the broker stopped while the connection stayed up is subscribed again. */
  consumerRestarted: [{ queue: string; reason: ConsumerRestartReason }];
  ack: [{ queue: string }];
  requeue: [{ queue: string }];
  deadLetter: [{ queue: string }];
}

/** Why a consumer was subscribed again (the `reason` label of amqp_consumer_restarts_total). */
export type ConsumerRestartReason = 'cancelled' | 'precondition_failed' | 'not_found' | 'channel_error';

/** RabbitMQ's direct reply-to pseudo-queue. */
export const RPC_REPLY_TO = 'amq.rabbitmq.reply-to';

/** AMQP 0-9-1 connection exception 541: the broker failed internally and closed the connection. */
export const INTERNAL_ERROR = 541;
