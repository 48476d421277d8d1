import { HooklineError } from './errors.js';

export const TENANT_ID_PATTERN = '^[A-Za-z0-9_-]{1,64}$';
const TENANT_ID = new RegExp(TENANT_ID_PATTERN);

export function assertTenantId(value: unknown): string {
  if (typeof value !== 'string' || !TENANT_ID.test(value)) {
    throw new HooklineError(
      'invalid_tenant_id',
      'tenant_id must be 1-64 characters of A-Z, a-z, 0-9, _ or -',
    );
  }
  return value;
}
