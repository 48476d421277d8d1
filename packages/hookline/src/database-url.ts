// What kind of database HOOKLINE_DATABASE_URL names. A module of its own, importing nothing, so the
// entry point can ask before the rest of the program loads (delivery/sender-thread-boot.ts).

/** Whether the URL names a PostgreSQL database (otherwise it is SQLite, or refused by config.ts). */
export function isPostgresUrl(databaseUrl: string): boolean {
  return /^postgres(ql)?:\/\//.test(databaseUrl);
}
