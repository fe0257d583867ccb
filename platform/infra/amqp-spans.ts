import type { Span } from '@opentelemetry/api';
import type { ConsumeMessage, Options } from 'amqplib';
import { RPC_REPLY_TO } from './amqp-link';
import { currentContext, REQUEST_ID_HEADER } from './context';
import { ATTR, extractContext, injectTraceHeaders, startSpan, tracingOn } from './tracing';

/**
 * `headers` plus what the work context carries across processes: the request the work belongs
 * to (`x-request-id`), so the consumer's log lines name it, and when tracing is on the W3C
 * `traceparent` / `tracestate` of `span` (the publish's producer span; default the active span),
 * so the consumer's spans join the trace. A header already set is kept.
 */
export function contextHeaders(headers: Record<string, unknown> = {}, span?: Span): Record<string, unknown> {
  const { requestId } = currentContext();
  const out =
    requestId && headers[REQUEST_ID_HEADER] === undefined ? { ...headers, [REQUEST_ID_HEADER]: requestId } : headers;
  return tracingOn ? injectTraceHeaders(out, span) : out;
}

/** RabbitMQ's direct reply-to queues have a random name per caller: one name for spans. */
const spanDestination = (exchange: string, routingKey: string) =>
  exchange || (routingKey.startsWith(RPC_REPLY_TO) ? RPC_REPLY_TO : routingKey);

/** The producer span of one publish (semantic conventions for RabbitMQ): `publish <exchange, or queue>`. */
export function producerSpan(
  exchange: string,
  routingKey: string,
  opts: Options.Publish,
  bytes: number,
): Span | undefined {
  const destination = spanDestination(exchange, routingKey);
  return startSpan(`publish ${destination}`, 'producer', {
    [ATTR.messagingSystem]: 'rabbitmq',
    [ATTR.messagingDestinationName]: destination,
    [ATTR.messagingOperationType]: 'send',
    [ATTR.messagingOperationName]: 'publish',
    [ATTR.messagingBodySize]: bytes,
    ...(exchange && routingKey ? { [ATTR.rabbitmqRoutingKey]: routingKey } : {}),
    ...(typeof opts.messageId === 'string' ? { [ATTR.messagingMessageId]: opts.messageId } : {}),
  });
}

/**
 * The consumer span of one delivery, `process <queue>`, child of the publisher's span (the
 * message's `traceparent`), or the root of a trace when the message carries none. Everything
 * the handler does (the job's claim, the engine call, the completion event) runs inside it.
 */
export function consumerSpan(queue: string, msg: ConsumeMessage): Span | undefined {
  const { messageId } = msg.properties;
  return startSpan(
    `process ${queue}`,
    'consumer',
    {
      [ATTR.messagingSystem]: 'rabbitmq',
      [ATTR.messagingDestinationName]: queue,
      [ATTR.messagingOperationType]: 'process',
      [ATTR.messagingOperationName]: 'process',
      [ATTR.messagingBodySize]: msg.content.length,
      ...(msg.fields.routingKey && msg.fields.routingKey !== queue
        ? { [ATTR.rabbitmqRoutingKey]: msg.fields.routingKey }
        : {}),
      ...(typeof messageId === 'string' ? { [ATTR.messagingMessageId]: messageId } : {}),
      ...(msg.fields.redelivered ? { 'svc.amqp.redelivered': true } : {}),
    },
    { parent: extractContext(msg.properties.headers) },
  );
}

/** A string header of a message, or undefined (absent, or not a short string). */
export const headerString = (msg: ConsumeMessage, name: string): string | undefined => {
  const v = msg.properties.headers?.[name];
  const s = Buffer.isBuffer(v) ? v.toString('utf8') : v;
  return typeof s === 'string' && s.length > 0 && s.length <= 256 ? s : undefined;
};
