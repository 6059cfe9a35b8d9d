-- A message longer than the embedder reads at once is embedded as passages
-- (issue 58): the vectors of the passages after the first, little-endian
-- f32s one after another, beside the first passage's in `vector`. One row
-- still holds a message's every vector, so deleting the row deletes them all.
ALTER TABLE vectors ADD COLUMN passages BYTEA;
