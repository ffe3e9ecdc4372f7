import type { FastifyRequest } from 'fastify';
import type { Account } from '../../store/interface.ts';
import { ApiError } from '../errors.ts';

/** The authenticated account; the auth hook guarantees it on `/api/v1` routes. */
export function requireAccount(request: FastifyRequest): Account {
  if (!request.account) throw new ApiError('INVALID_API_KEY', 'Authentication required');
  return request.account;
}
