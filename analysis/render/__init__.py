"""What a user reads: the report after a sweep (`report`), the course's per-node table in each
format (`tables`), the PNG plots (`plots`) and the self-contained HTML page (`html`)."""
