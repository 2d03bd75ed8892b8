"""Contract ids and adapter ABIs: what each requires of a component declaring it."""
