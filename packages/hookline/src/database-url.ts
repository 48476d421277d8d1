// What kind of database HOOKLINE_DATABASE_URL names, and the schema its `?schema=` asks for. A module
// of its own, importing nothing, so configuration and the producer can ask without loading a store.

/** Whether the URL names a PostgreSQL database (otherwise it is SQLite, or refused by config.ts). */
export function isPostgresUrl(databaseUrl: string): boolean {
  return /^postgres(ql)?:\/\//.test(databaseUrl);
}

/**
 * A PostgreSQL schema hookline's tables may live in: an unquoted lower-case identifier, so the same
 * name works in `search_path`, in the producer's qualified SQL and in the wake-up channel's name
 * without any quoting rules to get wrong (docs/producers.md, "Schema").
 */
export const SCHEMA_NAME_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;

export function schemaNameProblem(schema: string): string | null {
  return SCHEMA_NAME_PATTERN.test(schema)
    ? null
    : `schema "${schema}" must be 1-63 characters of a-z, 0-9 and _, not starting with a digit`;
}

/**
 * Splits `?schema=` off a postgres:// URL: hookline's own parameter, which the driver would not
 * understand. `schema` is null when the URL has none (the server's search_path then decides).
 */
export function splitSchema(databaseUrl: string): { connectionString: string; schema: string | null } {
  const url = new URL(databaseUrl);
  const schema = url.searchParams.get('schema');
  if (schema === null) return { connectionString: databaseUrl, schema: null };
  url.searchParams.delete('schema');
  return { connectionString: url.toString(), schema };
}
