import { Type } from '@sinclair/typebox';

const JsonObject = (description: string) => Type.Object({}, { additionalProperties: true, description });

export const EventTypeEntry = Type.Object({
  name: Type.String({ description: 'The event name, as in body type and the service-webhook-event header' }),
  description: Type.String(),
  schema: JsonObject('JSON Schema (draft 2020-12) of data'),
  example: JsonObject('An example data, valid against schema'),
});

export const EventTypeList = Type.Object({ data: Type.Array(EventTypeEntry) });
