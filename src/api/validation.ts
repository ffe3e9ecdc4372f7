import { ApiError, describe } from './errors.ts';
import { STORABLE_TEXT } from './schemas.ts';

/** The parts of an Ajv error this module reads. */
export interface SchemaError {
  instancePath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
}

/** `/messages/0/role` → `messages[0].role`. */
export function fieldName(instancePath: string, missing?: string): string {
  const parts = instancePath.split('/').slice(1);
  if (missing !== undefined) parts.push(missing);
  let out = '';
  for (const p of parts) {
    const name = p.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(name) ? `[${name}]` : out === '' ? name : `.${name}`;
  }
  return out === '' ? 'body' : out;
}

function valueAt(body: unknown, instancePath: string): unknown {
  let cur: unknown = body;
  for (const p of instancePath.split('/').slice(1)) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string, unknown>)[p.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return cur;
}

const TYPE_NAMES: Record<string, string> = {
  object: 'a JSON object',
  array: 'an array',
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'true or false',
};

function expectation(e: SchemaError): string {
  const p = e.params;
  switch (e.keyword) {
    case 'required':
      return 'present';
    case 'type':
      return TYPE_NAMES[String(p.type)] ?? String(p.type);
    case 'enum':
      return `one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'minItems':
      return p.limit === 1 ? 'a non-empty array' : `at least ${String(p.limit)} items`;
    case 'maxItems':
      return `at most ${String(p.limit)} items`;
    case 'minLength':
      return p.limit === 1 ? 'a non-empty string' : `at least ${String(p.limit)} characters`;
    case 'maxLength':
      return `at most ${String(p.limit)} characters`;
    case 'minimum':
      return `a number >= ${String(p.limit)}`;
    case 'maximum':
      return `a number <= ${String(p.limit)}`;
    case 'uniqueItems':
      return 'an array without repeated items';
    case 'pattern':
      return p.pattern === STORABLE_TEXT
        ? 'text without NUL (U+0000) characters or unpaired surrogates'
        : `a string matching ${String(p.pattern)}`;
    default:
      return e.message ?? e.keyword;
  }
}

/**
 * Turns the first schema error of a request body into the spec's INVALID_INPUT (or, for the
 * messages array as a whole on check, INVALID_MESSAGES) with field-level details.
 */
export function schemaErrorToApiError(errors: readonly SchemaError[], body: unknown, route: string): ApiError {
  const e = errors[0];
  if (!e) return new ApiError('INVALID_INPUT', 'The request body is invalid');
  const missing = e.keyword === 'required' ? String(e.params.missingProperty) : undefined;
  const field = fieldName(e.instancePath, missing);
  const received = missing !== undefined ? undefined : valueAt(body, e.instancePath);
  const expected = expectation(e);
  const details = { field, expected, received: describe(received) };

  const wholeMessages = field === 'messages' || (field === 'body' && (body === undefined || body === null));
  if (route === 'check' && wholeMessages) {
    const tooMany = e.keyword === 'maxItems';
    return new ApiError(
      tooMany ? 'INVALID_INPUT' : 'INVALID_MESSAGES',
      tooMany ? `messages must have ${expected}` : 'messages must be a non-empty array of {role, content} objects',
      { field: 'messages', expected: tooMany ? expected : 'a non-empty array of messages', received: describe(valueAt(body, '/messages')) },
    );
  }
  if (field === 'body') {
    return new ApiError('INVALID_INPUT', 'The request body must be a JSON object', {
      field: 'body',
      expected: 'a JSON object',
      received: describe(body),
    });
  }
  // A count of items is what a field must have ("at most 256 items"); anything else, what it must be.
  const counted = e.keyword === 'maxItems' || (e.keyword === 'minItems' && e.params.limit !== 1);
  const message = missing !== undefined ? `${field} is required` : `${field} must ${counted ? 'have' : 'be'} ${expected}`;
  return new ApiError('INVALID_INPUT', message, details);
}
