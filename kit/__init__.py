"""Pure helpers with no bus access: redaction, the credential guard, .env reading."""
